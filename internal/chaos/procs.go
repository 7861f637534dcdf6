package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startTimeout bounds how long a process may take to say it is ready.
const startTimeout = 15 * time.Second

// proc is one child process the suite started, which it can kill, pause
// and restart with the same arguments. Its output goes to a log file in the
// run's directory. It is safe for concurrent use.
type proc struct {
	name  string
	bin   string
	args  []string
	ready func(line string) bool // recognises the line that says it serves
	log   string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd exited
	paused  bool
	crashed bool // a run ended on its own before kill came to it
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// start runs the process and waits until it prints its ready line.
func (p *proc) start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	// The child dies with the suite, whatever kills the suite.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout = io.MultiWriter(logf, pw)
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("chaos: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		pw.Close()
		logf.Close()
		close(done)
	}()
	readyc := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if p.ready(sc.Text()) {
				readyc <- true
				break
			}
		}
		go io.Copy(io.Discard, pr) // keep the pipe flowing
	}()
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case <-readyc:
	case <-done:
		return fmt.Errorf("chaos: %s exited before it was ready (see %s)", p.name, p.log)
	case <-t.C:
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("chaos: %s not ready after %v (see %s)", p.name, startTimeout, p.log)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return ctx.Err()
	}
	p.cmd, p.done, p.paused = cmd, done, false
	return nil
}

// kill sends SIGKILL, as a crash would, waits for the process to go, and
// forgets it; it reports whether it killed a running process. A process
// that had already ended on its own (or was killed by someone else) is
// forgotten too, but exited goes on reporting it: a fault that comes to a
// crashed process neither fires nor hides the crash.
func (p *proc) kill() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	sent := false
	select {
	case <-p.done:
	default:
		sent = p.cmd.Process.Signal(syscall.SIGKILL) == nil
	}
	<-p.done
	killed := false
	if st := p.cmd.ProcessState; sent && st != nil {
		ws, _ := st.Sys().(syscall.WaitStatus)
		killed = ws.Signaled() && ws.Signal() == syscall.SIGKILL
	}
	if !killed {
		p.crashed = true
	}
	p.cmd, p.done, p.paused = nil, nil, false
	return killed
}

// alive reports whether the process runs (paused or not).
func (p *proc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil
}

// pause stops the process with SIGSTOP; resume continues it. Both do
// nothing when the process is not running.
func (p *proc) pause() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.paused {
		return false
	}
	p.paused = p.cmd.Process.Signal(syscall.SIGSTOP) == nil
	return p.paused
}

func (p *proc) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.paused {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		p.paused = false
	}
}

// exited reports whether a started process ended on its own (it crashed):
// the suite only kills processes through kill, which forgets them, but
// remembers a crash it came to.
func (p *proc) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.crashed {
		return true
	}
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// redisServer is a Redis of the suite's own, on a port of its own, that
// writes every change to its append-only file before answering
// (appendfsync always), so that a kill -9 and a restart lose no record.
func redisServer(bin, dir string) (*proc, string, error) {
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			return nil, "", errors.New("chaos: redis-server is not on PATH: the Redis cells need it (apt-get install redis-server)")
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	_, port, _ := net.SplitHostPort(addr)
	data := filepath.Join(dir, "redis")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, "", err
	}
	return &proc{
		name: "redis-server :" + port,
		bin:  bin,
		args: []string{"--port", port, "--bind", "127.0.0.1", "--dir", data, "--save", "",
			"--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction",
			"--daemonize", "no", "--protected-mode", "yes"},
		ready: func(line string) bool { return strings.Contains(line, "Ready to accept connections") },
		log:   filepath.Join(dir, "redis.log"),
	}, addr, nil
}

// storeWait is the -store-wait of the mock servers: one (re)started while
// the cell's Redis restarts, or while a PostgreSQL cut meets its schema
// creation, waits for the store in-process instead of exiting and being
// started again by restart. It ends before startTimeout, so that a store
// that stays down ends the process with the store's error in its log, not
// with the suite's kill.
const storeWait = startTimeout * 2 / 3

// mockServer is one cmd/mockserver instance.
func mockServer(bin, dir, name string, args []string) (*proc, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	return &proc{
		name:  name,
		bin:   bin,
		args:  append([]string{"-addr", addr, "-store-wait", storeWait.String()}, args...),
		ready: func(line string) bool { return strings.HasPrefix(line, "mockserver: listening on ") },
		log:   filepath.Join(dir, name+".log"),
	}, addr, nil
}

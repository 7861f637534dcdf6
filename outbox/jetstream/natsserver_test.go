package jetstream_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
)

// natsBin is the nats-server binary the tests that need a server of their
// own (a limit set in its configuration, a restart) run.
const natsBin = "/usr/sbin/nats-server"

// natsServer is one test's own nats-server with JetStream, on a free port
// and a store directory of its own: killed when the test ends, never the
// shared one.
type natsServer struct {
	tb   testing.TB
	conf string
	port int
	name string // server_name, which tells it from another test's
	cmd  *exec.Cmd
}

// startNATS starts a nats-server whose configuration file holds conf plus
// the listen address, the server's name and the JetStream store directory
// (conf must not set them), and skips tb when there is no nats-server
// binary.
func startNATS(tb testing.TB, conf string) *natsServer {
	tb.Helper()
	if _, err := os.Stat(natsBin); err != nil {
		testenv.Unavailable(tb, "no "+natsBin+": install nats-server to run")
	}
	dir := tb.TempDir()
	s := &natsServer{tb: tb, conf: filepath.Join(dir, "nats.conf")}
	// A free port is not held: another test's server (of this process or
	// of another package's, run at the same time) may take it first. Then
	// this one does not come up, and a dial reaches the other: the name
	// in the server's INFO tells them apart, and another port is tried.
	for try := 0; ; try++ {
		s.port = testenv.FreePorts(tb, 1, false)
		s.name = fmt.Sprintf("saferetry-test-%d-%d", os.Getpid(), s.port)
		full := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nserver_name: %q\njetstream { store_dir: %q }\n%s\n",
			s.port, s.name, filepath.Join(dir, "store"), conf)
		if err := os.WriteFile(s.conf, []byte(full), 0o600); err != nil {
			tb.Fatal(err)
		}
		err := s.tryStart()
		if err == nil {
			break
		}
		s.kill()
		if try == 4 {
			tb.Fatal(err)
		}
	}
	tb.Cleanup(s.kill)
	return s
}

func (s *natsServer) start() {
	s.tb.Helper()
	if err := s.tryStart(); err != nil {
		s.tb.Fatal(err)
	}
}

// tryStart starts the server and waits until it answers on its port as
// itself (its name in the INFO it greets a client with).
func (s *natsServer) tryStart() error {
	s.cmd = exec.Command(natsBin, "-c", s.conf)
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start nats-server: %w", err)
	}
	for range 200 {
		if name, err := serverName(s.addr()); err == nil {
			if name != s.name {
				return fmt.Errorf("nats-server on %s is %q, another test's: the port was taken", s.addr(), name)
			}
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("nats-server on %s did not come up", s.addr())
}

// serverName returns the server_name of the NATS server at addr, read from
// the INFO line it greets a client with.
func serverName(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	var info struct {
		Name string `json:"server_name"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "INFO ")), &info); err != nil {
		return "", fmt.Errorf("INFO from %s: %w", addr, err)
	}
	return info.Name, nil
}

// kill kills the server with SIGKILL (a no-op when it is not running).
func (s *natsServer) kill() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// freeze stops the server (SIGSTOP): it keeps its connections and
// answers nothing until thaw, as a server that hangs.
func (s *natsServer) freeze() {
	s.tb.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.tb.Fatal(err)
	}
	// The signal is delivered asynchronously: wait until the process is
	// seen stopped (Linux's /proc; elsewhere the signal is trusted).
	stat := fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid)
	for range 200 {
		b, err := os.ReadFile(stat)
		if err != nil {
			return
		}
		// "pid (comm) state ...": the state follows the last ")".
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.tb.Fatalf("nats-server %d not seen stopped after SIGSTOP", s.cmd.Process.Pid)
}

// thaw lets a frozen server go on (SIGCONT).
func (s *natsServer) thaw() {
	s.tb.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		s.tb.Fatal(err)
	}
}

// restart kills the server and starts it again on its store.
func (s *natsServer) restart() { s.tb.Helper(); s.kill(); s.start() }

func (s *natsServer) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// connect connects to the server (reconnecting for ever, every 100 ms) and
// returns the connection and its JetStream context; the connection is
// closed when the test ends.
func (s *natsServer) connect(tb testing.TB, opts ...nats.Option) (*nats.Conn, natsjs.JetStream) {
	tb.Helper()
	nc, err := nats.Connect("nats://"+s.addr(), append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return nc, js
}

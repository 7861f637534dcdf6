package jetstream_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	cmd  *exec.Cmd
}

// startNATS starts a nats-server whose configuration file holds conf plus
// the listen address and the JetStream store directory (conf must not set
// them), and skips tb when there is no nats-server binary.
func startNATS(tb testing.TB, conf string) *natsServer {
	tb.Helper()
	if _, err := os.Stat(natsBin); err != nil {
		testenv.Unavailable(tb, "no "+natsBin+": install nats-server to run")
	}
	dir := tb.TempDir()
	s := &natsServer{tb: tb, port: testenv.FreePorts(tb, 1, false), conf: filepath.Join(dir, "nats.conf")}
	full := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\n%s\n", s.port, filepath.Join(dir, "store"), conf)
	if err := os.WriteFile(s.conf, []byte(full), 0o600); err != nil {
		tb.Fatal(err)
	}
	s.start()
	tb.Cleanup(s.kill)
	return s
}

func (s *natsServer) start() {
	s.tb.Helper()
	s.cmd = exec.Command(natsBin, "-c", s.conf)
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("start nats-server: %v", err)
	}
	for range 200 {
		if c, err := net.Dial("tcp", s.addr()); err == nil {
			c.Close()
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	s.tb.Fatalf("nats-server on %s did not come up", s.addr())
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

package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testenv"
)

// TestStartNATSLeavesNothingOnFailure: a nats-server that does not come up
// (its port taken, its binary missing, one that exits at once, one that
// never listens) leaves neither its temporary store directory nor a
// running process behind, so that a failed fault run cleans up as a
// finished one does.
func TestStartNATSLeavesNothingOnFailure(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	free := testenv.FreePorts(t, 1, false)

	bins := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(bins, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pidFile := filepath.Join(bins, "silent.pid")
	exits := script("exits", "exit 3")
	silent := script("silent", "echo $$ > "+pidFile+"\nexec sleep 60")
	t.Cleanup(func() { // the test's own process, should it have been left running
		if pid := readPID(pidFile); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	for _, c := range []struct {
		name, bin string
		port      int
	}{
		{"port in use", "/nonexistent/nats-server", busyPort},
		{"no binary", "/nonexistent/nats-server", free},
		{"exits at once", exits, free},
		{"never listens", silent, free},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			s, err := launchNATS(c.bin, c.port, 500*time.Millisecond)
			if err == nil {
				s.stop()
				t.Fatal("launchNATS succeeded")
			}
			left, _ := os.ReadDir(tmp)
			var names []string
			for _, e := range left {
				names = append(names, e.Name())
			}
			if len(names) > 0 {
				t.Errorf("launchNATS failed (%v) and left %s in $TMPDIR", err, strings.Join(names, ", "))
			}
		})
	}
	pid := readPID(pidFile)
	if pid <= 0 {
		t.Fatalf("the silent nats-server never ran (no pid in %s)", pidFile)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the nats-server that never listened (pid %d) still runs after launchNATS gave up on it", pid)
	}
}

// readPID reads the pid a script wrote to path, or returns 0.
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

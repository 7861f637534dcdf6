package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// childEnv makes this test binary run the command itself (see TestMain).
const childEnv = "SAFERETRY_QUICKSTART_CHILD"

// TestMain runs the command itself when this test binary is started as
// one by command.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// command runs the quickstart command with args, this test binary standing
// in for it, and returns what it printed and its exit status.
func command(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("run the command: %v", err)
	}
	return out.String(), errOut.String(), code
}

// TestHelpPrintsUsage: -h says what the command does and exits 0, without
// running the demo.
func TestHelpPrintsUsage(t *testing.T) {
	out, errOut, code := command(t, "-h")
	if code != 0 || strings.Contains(out, "VERDICT") || !strings.Contains(errOut, "Usage") {
		t.Errorf("quickstart -h: exit %d, stdout:\n%s\nstderr:\n%s\nwant the usage on stderr, exit 0 and no demo run", code, out, errOut)
	}
}

// TestCommandLineRefused: an unknown flag or a stray argument is refused
// with exit status 2, as the other examples do, rather than ignored.
func TestCommandLineRefused(t *testing.T) {
	for _, args := range [][]string{{"-payments", "10"}, {"extra"}} {
		out, errOut, code := command(t, args...)
		if code != 2 || strings.Contains(out, "VERDICT") {
			t.Errorf("quickstart %q: exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 2 and no demo run", args, code, out, errOut)
		}
	}
}

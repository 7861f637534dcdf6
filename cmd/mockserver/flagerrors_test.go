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

// runMainStderr runs main in a child process with args, as a user runs the
// binary, and returns its exit status and what it printed to stderr.
func runMainStderr(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRunMain+"=1", envMainArgs+"="+strings.Join(args, " "))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String()
	} else if err != nil {
		t.Fatalf("running main %q: %v", args, err)
	}
	return 0, stderr.String()
}

// TestFlagErrorsSayWhatAndOnce: a command line the binary refuses is
// answered, with exit status 2, by the error once, with a hint for the
// usual mistakes, and one line pointing at -h; not by the whole usage
// followed by the error a second time. "-admin false" (a boolean flag
// takes its value after "=") said only: unexpected arguments ["false"];
// "-ttl 5" said Go's bare "parse error", not that a duration needs a
// unit. -h still prints the usage.
func TestFlagErrorsSayWhatAndOnce(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		said      string // once
		hint      string
		notBefore string // not in the output when the error is printed
	}{
		{[]string{"-admin", "false"}, `unexpected argument "false"`, "-admin=false", "address to listen on"},
		{[]string{"-metrics", "true", "-v"}, `unexpected argument "true"`, "-metrics=true", "address to listen on"},
		{[]string{"-ttl", "5"}, `invalid value "5" for flag -ttl`, "a duration needs a unit, such as 5s", "address to listen on"},
		{[]string{"-store-wait", "ten"}, `invalid value "ten" for flag -store-wait`, "such as 300ms", "address to listen on"},
		{[]string{"-max-entries", "1e6"}, `invalid value "1e6" for flag -max-entries`, "an integer", "address to listen on"},
		{[]string{"-nosuchflag"}, "flag provided but not defined: -nosuchflag", "", "address to listen on"},
		{[]string{"extra"}, `unexpected argument "extra"`, "", "address to listen on"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stderr := runMainStderr(t, tc.args...)
			if code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if n := strings.Count(stderr, tc.said); n != 1 {
				t.Errorf("stderr says %q %d times, want once:\n%s", tc.said, n, stderr)
			}
			if !strings.Contains(stderr, tc.hint) {
				t.Errorf("stderr has no hint %q:\n%s", tc.hint, stderr)
			}
			if strings.Contains(stderr, tc.notBefore) || strings.Contains(stderr, "Usage of") {
				t.Errorf("stderr prints the whole usage:\n%s", stderr)
			}
			if !strings.Contains(stderr, `Run "mockserver -h" for the flags.`) {
				t.Errorf("stderr does not point at -h:\n%s", stderr)
			}
			if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 2 {
				t.Errorf("stderr has %d lines, want the error and the pointer at -h:\n%s", len(lines), stderr)
			}
		})
	}

	code, stderr := runMainStderr(t, "-h")
	if code != 0 || !strings.Contains(stderr, "Usage of mockserver") || !strings.Contains(stderr, "address to listen on") {
		t.Errorf("-h: exit status %d, stderr:\n%s\nwant 0 and the usage", code, stderr)
	}
}

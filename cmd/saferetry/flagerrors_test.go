package main

import (
	"strings"
	"testing"
)

// TestFlagErrorsSayWhatAndOnce: a command line that check or mock
// refuses is answered, with exit status 2, by the error once, with a hint
// for the usual mistakes, and one line pointing at the subcommand's -h;
// not by the subcommand's whole usage followed by the error a second time.
// Both subcommands, and cmd/mockserver, say it alike.
func TestFlagErrorsSayWhatAndOnce(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		said, hint string
		help       string // a flag's help text, not printed on an error
		pointer    string
	}{
		{[]string{"check", "-url", "http://127.0.0.1:1/p", "-json", "true"}, `unexpected argument "true"`, "-json=true",
			"the endpoint's URL", `Run "saferetry check -h" for the flags.`},
		{[]string{"check", "-url", "http://127.0.0.1:1/p", "-ttl", "5"}, `invalid value "5" for flag -ttl`, "a duration needs a unit, such as 5s",
			"the endpoint's URL", `Run "saferetry check -h" for the flags.`},
		{[]string{"check", "-concurrency", "many"}, `invalid value "many" for flag -concurrency`, "an integer",
			"the endpoint's URL", `Run "saferetry check -h" for the flags.`},
		{[]string{"check", "-nope"}, "flag provided but not defined: -nope", "",
			"the endpoint's URL", `Run "saferetry check -h" for the flags.`},
		{[]string{"mock", "-admin", "false"}, `unexpected argument "false"`, "-admin=false",
			"address to listen on", `Run "saferetry mock -h" for the flags.`},
		{[]string{"mock", "-lease", "10"}, `invalid value "10" for flag -lease`, "a duration needs a unit, such as 10s",
			"address to listen on", `Run "saferetry mock -h" for the flags.`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit status %d, want %d", code, exitUsage)
			}
			if n := strings.Count(stderr, tc.said); n != 1 {
				t.Errorf("stderr says %q %d times, want once:\n%s", tc.said, n, stderr)
			}
			if !strings.Contains(stderr, tc.hint) {
				t.Errorf("stderr has no hint %q:\n%s", tc.hint, stderr)
			}
			if strings.Contains(stderr, tc.help) || strings.Contains(stderr, "Usage of") {
				t.Errorf("stderr prints the whole usage:\n%s", stderr)
			}
			if !strings.Contains(stderr, tc.pointer) {
				t.Errorf("stderr does not point at -h with %q:\n%s", tc.pointer, stderr)
			}
			if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 2 {
				t.Errorf("stderr has %d lines, want the error and the pointer at -h:\n%s", len(lines), stderr)
			}
		})
	}
	for _, sub := range []string{"check", "mock"} {
		if code, _, stderr := runCLI(t, sub, "-h"); code != exitPassed || !strings.Contains(stderr, "Usage of saferetry "+sub) {
			t.Errorf("%s -h: exit status %d, stderr:\n%s\nwant %d and the usage", sub, code, stderr, exitPassed)
		}
	}
}

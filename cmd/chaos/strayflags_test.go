package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestParseFlagsRefusesWhatItWouldIgnore: a stray argument ("long" for
// "-profile long") or a negative count or duration is refused, not
// ignored in favour of the profile's settings: ignored, "chaos long" runs
// the short profile for minutes, and "-ops -5" the profile's 300
// operations, with nothing said.
func TestParseFlagsRefusesWhatItWouldIgnore(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"long"}, "unexpected argument"},
		{[]string{"-stores", "redis", "kill"}, "unexpected argument"},
		{[]string{"-ops", "-5"}, "-ops"},
		{[]string{"-timeout", "-1m"}, "-timeout"},
		{[]string{"-pace", "-2s"}, "-pace"},
	} {
		var stderr bytes.Buffer
		p, err := parseFlags(tt.args, &stderr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseFlags %q = %v (profile %s, %d ops, timeout %v, pace %v); want an error about %s",
				tt.args, err, p.profile, p.ops, p.timeout, p.pace, tt.want)
		}
	}
}

// TestPaceHelpNamesAValue: -pace's help names no value that the flag
// refuses: "-1: the profile's" was not a duration ("-pace -1" is a parse
// error), so the help offered a value that cannot be given.
func TestPaceHelpNamesAValue(t *testing.T) {
	var stderr bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &stderr); err == nil {
		t.Fatal("-h: no error")
	}
	if strings.Contains(stderr.String(), "-1: the profile's") {
		t.Errorf("-pace's help names -1, which -pace refuses:\n%s", stderr.String())
	}
	if _, err := parseFlags([]string{"-pace", "0"}, &bytes.Buffer{}); err != nil {
		t.Errorf("-pace 0: %v", err)
	}
}

// TestFlagErrorSaidOnce: a refused command line prints nothing of its
// own (the caller prints the error once), and the error has the shared
// CLIs' hint and the line that points at -h: package flag printed the
// whole usage and the error, then main printed the error again.
func TestFlagErrorSaidOnce(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-timeout", "5"}, "a duration needs a unit"},
		{[]string{"-keep", "false"}, "-keep=false"},
		{[]string{"long"}, `unexpected argument "long"`},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(tt.args, &stderr)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `Run "chaos -h" for the flags.`) {
			t.Errorf("parseFlags %q = %v; want an error saying %q and pointing at -h", tt.args, err, tt.want)
		}
		if stderr.Len() != 0 {
			t.Errorf("parseFlags %q printed %q; want nothing (the caller prints the error once)", tt.args, stderr.String())
		}
	}
}

package cliflag

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

func newFlagSet(out *bytes.Buffer) *flag.FlagSet {
	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Bool("v", false, "verbose")
	fs.Duration("ttl", time.Hour, "how long")
	fs.Int("n", 1, "how many")
	fs.String("s", "", "a string")
	return fs
}

// TestParseHints: the hints go with the mistakes they are about, and
// nowhere else; nothing is printed on an error; the values are package
// flag's own again after Parse, so that the usage names their types.
func TestParseHints(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"-v", "false"}, `-v=false`, ""},
		{[]string{"--v", "true", "x"}, `-v=true`, ""},
		{[]string{"-v", "extra"}, `unexpected argument "extra"`, "boolean"},
		{[]string{"-v=true", "false"}, `unexpected argument "false"`, "boolean"},
		{[]string{"--", "false"}, `unexpected argument "false"`, "boolean"},
		{[]string{"-s", "x", "false"}, `unexpected argument "false"`, "boolean"},
		{[]string{"-ttl", "1.5"}, "such as 1.5s", ""},
		{[]string{"-ttl", "1x"}, "want a duration", "needs a unit"},
		{[]string{"-n", "2.0"}, "want an integer", ""},
		{[]string{"-n", "99999999999999999999"}, "value out of range", "want an integer"},
		{[]string{"-v=maybe"}, "want true or false", ""},
	} {
		var out bytes.Buffer
		err := Parse(newFlagSet(&out), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) || tc.not != "" && strings.Contains(err.Error(), tc.not) {
			t.Errorf("Parse %q = %v, want an error saying %q, not %q", tc.args, err, tc.want, tc.not)
			continue
		}
		if !strings.HasPrefix(err.Error(), "cmd: ") || !strings.HasSuffix(err.Error(), "\nRun \"cmd -h\" for the flags.") {
			t.Errorf("Parse %q = %q, want it prefixed with the name and pointing at -h", tc.args, err)
		}
		if out.Len() > 0 {
			t.Errorf("Parse %q printed %q", tc.args, out.String())
		}
	}

	var out bytes.Buffer
	fs := newFlagSet(&out)
	if err := Parse(fs, []string{"-ttl", "5"}); err == nil {
		t.Fatal("-ttl 5 taken")
	}
	if err := Parse(fs, []string{"-h"}); err != flag.ErrHelp {
		t.Fatalf("-h: %v", err)
	}
	if !strings.Contains(out.String(), "-ttl duration") || !strings.Contains(out.String(), "-n int") {
		t.Errorf("usage after a refused command line does not name the flags' types:\n%s", out.String())
	}
}

// TestParseDurationHintParses: a duration's hint suggests only values
// that the flag takes; a number that no unit makes a duration (1e3, Inf,
// 0x10, which strconv.ParseFloat reads) gets the general hint.
func TestParseDurationHintParses(t *testing.T) {
	for _, v := range []string{"5", "1.5", "-5", ".5", "1e3", "Inf", "NaN", "0x10", "+2"} {
		var out bytes.Buffer
		err := Parse(newFlagSet(&out), []string{"-ttl", v})
		if err == nil {
			t.Errorf("-ttl %s taken", v)
			continue
		}
		msg := err.Error()
		_, hint, ok := strings.Cut(msg, "needs a unit, such as ")
		if !ok {
			if !strings.Contains(msg, "want a duration") {
				t.Errorf("-ttl %s: %q gives no hint", v, msg)
			}
			continue
		}
		hint, _, _ = strings.Cut(hint, "\n")
		for _, s := range strings.FieldsFunc(hint, func(r rune) bool { return r == ',' || r == ' ' }) {
			if s == "or" {
				continue
			}
			if _, err := time.ParseDuration(s); err != nil {
				t.Errorf("-ttl %s: the hint %q suggests %q, which is no duration: %v", v, msg, s, err)
			}
		}
	}
}

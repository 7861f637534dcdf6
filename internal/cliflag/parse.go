// Package cliflag parses the command lines of the module's commands
// (cmd/mockserver, saferetry's check and mock, and cmd/chaos) alike: a
// command line refused is told in one error, with a hint for the usual
// mistakes, and a line pointing at -h, rather than the whole usage
// followed by the error a second time, as package flag prints them.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Parse parses args, the command line after the command's name, with fs,
// which must be flag.ContinueOnError. Arguments left after the flags are
// refused: no command of the module takes any.
//
// For -h or -help it prints fs's usage to fs's output and returns
// flag.ErrHelp. For a command line it refuses it prints nothing and
// returns the error for the caller to print: what is wrong, prefixed with
// fs's name, and a hint for the usual mistakes (a boolean flag given its
// value after a space, "-admin false"; a duration without a unit, "-ttl
// 5"; a number that is no integer), then a line that points at -h.
//
// It changes fs while it parses: it is not safe to use fs meanwhile.
func Parse(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	restore := hintValues(fs)
	err := fs.Parse(args)
	restore()
	fs.SetOutput(out)
	fs.Usage = usage

	switch {
	case errors.Is(err, flag.ErrHelp):
		if usage != nil {
			usage()
		} else {
			fmt.Fprintf(out, "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
		return err
	case err != nil:
		return refused(fs, err.Error())
	case fs.NArg() > 0:
		return refused(fs, strayDetail(fs, args))
	}
	return nil
}

// refused is Parse's error for a command line that fs refused, for the
// reason given.
func refused(fs *flag.FlagSet, reason string) error {
	return fmt.Errorf("%s: %s\nRun %q for the flags.", fs.Name(), reason, fs.Name()+" -h")
}

// strayDetail says which argument of args is left after fs parsed them,
// and, when it follows a boolean flag and is a value of it, that such a
// flag takes its value after "=".
func strayDetail(fs *flag.FlagSet, args []string) string {
	rest := fs.Args()
	detail := fmt.Sprintf("unexpected argument %q", rest[0])
	if len(rest) > 1 {
		detail += fmt.Sprintf(" (and after it %q, not read as flags)", rest[1:])
	}
	i := len(args) - len(rest) // rest[0] is args[i]
	if i == 0 {
		return detail
	}
	prev := args[i-1]
	name := strings.TrimLeft(prev, "-")
	if !strings.HasPrefix(prev, "-") || prev == "--" || strings.Contains(name, "=") {
		return detail
	}
	f := fs.Lookup(name)
	if f == nil || !isBoolFlag(f.Value) {
		return detail
	}
	if _, err := strconv.ParseBool(rest[0]); err != nil && rest[0] != f.DefValue {
		return detail
	}
	return fmt.Sprintf("%s: -%s is a boolean flag, which takes a value only after \"=\": -%s=%s", detail, name, name, rest[0])
}

// isBoolFlag reports whether v is the value of a flag that stands alone
// (-v), as package flag tells one.
func isBoolFlag(v flag.Value) bool {
	b, ok := v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

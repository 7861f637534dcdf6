package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"
)

// hintValues has each flag of fs whose value is one of package flag's
// own (a duration, an integer, a number, a boolean) refuse a value with a
// hint of what it takes, where package flag says "parse error", and
// returns the function that puts the flags' values back, for fs's usage
// to print their types as package flag names them.
func hintValues(fs *flag.FlagSet) (restore func()) {
	var hinted []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return // a Value of the command's own says what it takes
		}
		switch g.Get().(type) {
		case time.Duration, int, int64, float64, bool:
			f.Value = hintedValue{g}
			hinted = append(hinted, f)
		}
	})
	return func() {
		for _, f := range hinted {
			f.Value = f.Value.(hintedValue).Getter
		}
	}
}

// hintedValue is a flag's value of package flag's own, whose Set says
// what the flag takes when it refuses a value.
type hintedValue struct{ flag.Getter }

func (h hintedValue) IsBoolFlag() bool { return isBoolFlag(h.Getter) }

func (h hintedValue) Set(v string) error {
	err := h.Getter.Set(v)
	if err == nil {
		return nil
	}
	switch h.Get().(type) {
	case time.Duration:
		// A number that a unit makes a duration: not every one that
		// strconv.ParseFloat reads (1e3, Inf, NaN) is.
		if _, derr := time.ParseDuration(v + "s"); derr == nil {
			return fmt.Errorf("a duration needs a unit, such as %ss, %sms or %sm", v, v, v)
		}
		return errors.New("want a duration, such as 300ms, 5s, 1m or 1h30m")
	case bool:
		return errors.New("want true or false")
	case float64:
		return errors.New("want a number")
	}
	// An int or an int64: an integer refused is out of range, which
	// package flag says.
	if _, perr := strconv.ParseInt(v, 0, 64); perr == nil || errors.Is(perr, strconv.ErrRange) {
		return err
	}
	return errors.New("want an integer, written in digits only (1000000, not 1e6 or 1,000,000)")
}

package testkit

import (
	"strings"
	"testing"
)

// WantPanic calls f and fails t, at the caller's line, unless f panics
// with a string that contains substr.
func WantPanic(t testing.TB, substr string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, substr) {
			t.Errorf("panic %v, want one mentioning %q", r, substr)
		}
	}()
	f()
}

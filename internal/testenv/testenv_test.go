package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// fakeTB records how a helper ended the test: Skip and Fatal stop the
// helper with a panic that run recovers, as runtime.Goexit would.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	msg             string
	cleanups        []func()
}

type stopped struct{}

func (f *fakeTB) Helper()      {}
func (f *fakeTB) Name() string { return "TestFake" }
func (f *fakeTB) Skip(args ...any) {
	f.skipped, f.msg = true, fmt.Sprint(args...)
	panic(stopped{})
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	panic(stopped{})
}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

func run(fn func(tb testing.TB) string) (f *fakeTB, got string) {
	f = &fakeTB{}
	defer func() {
		if r := recover(); r != nil && r != (stopped{}) {
			panic(r)
		}
	}()
	return f, fn(f)
}

func TestServiceURLRule(t *testing.T) {
	for _, tc := range []struct {
		name              string
		fn                func(testing.TB) string
		env, example, set string
	}{
		{"redis", RedisURL, EnvRedisURL, ExampleRedisURL, "redis://example:1/2"},
		{"postgres", PostgresURL, EnvPostgresURL, ExamplePostgresURL, "postgres://example/db"},
	} {
		t.Run(tc.name+" unset", func(t *testing.T) {
			t.Setenv(tc.env, "")
			t.Setenv(EnvRequireServices, "")
			f, _ := run(tc.fn)
			if !f.skipped || f.failed || !strings.Contains(f.msg, "set "+tc.env+"='"+tc.example+"' to run") {
				t.Errorf("unset: skipped=%v failed=%v msg=%q, want a skip saying how to run", f.skipped, f.failed, f.msg)
			}
		})
		t.Run(tc.name+" unset, required", func(t *testing.T) {
			t.Setenv(tc.env, "")
			t.Setenv(EnvRequireServices, "1")
			f, _ := run(tc.fn)
			if f.skipped || !f.failed || !strings.Contains(f.msg, EnvRequireServices) {
				t.Errorf("required: skipped=%v failed=%v msg=%q, want a failure", f.skipped, f.failed, f.msg)
			}
		})
		t.Run(tc.name+" set", func(t *testing.T) {
			t.Setenv(tc.env, tc.set)
			t.Setenv(EnvRequireServices, "1")
			f, got := run(tc.fn)
			if f.skipped || f.failed || got != tc.set {
				t.Errorf("set: got %q skipped=%v failed=%v", got, f.skipped, f.failed)
			}
		})
	}
}

func TestRandomName(t *testing.T) {
	a, b := RandomName("p_"), RandomName("p_")
	if a == b || !strings.HasPrefix(a, "p_") || len(a) != len("p_")+12 || strings.Trim(a[2:], "0123456789abcdef") != "" {
		t.Errorf("RandomName twice = %q, %q; want two different p_ + 12 hex digits", a, b)
	}
}

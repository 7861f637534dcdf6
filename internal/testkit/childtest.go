package testkit

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// RunChildTest runs the tests of this test binary that the -test.run
// pattern run matches in a child process, with the environment variable env
// set to value, and returns what it printed and whether it passed. It fails
// t when the child has not ended within limit. The mutant suites run a
// suite on a broken implementation this way, so that the suite's failures
// stay out of the parent's result.
func RunChildTest(t testing.TB, run, env, value string, limit time.Duration) (string, bool) {
	t.Helper()
	return StartChildTest(run, env, value, limit)(t)
}

// StartChildTest starts the child process of RunChildTest and returns at
// once, so that several children, which mostly wait, can run at the same
// time whatever -test.parallel is. The function it returns waits for the
// child and answers as RunChildTest does; call it once, from the goroutine
// of the test that t names.
func StartChildTest(run, env, value string, limit time.Duration) func(t testing.TB) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+value)
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := cmd.CombinedOutput()
		done <- result{out, err}
	}()
	return func(t testing.TB) (string, bool) {
		t.Helper()
		defer cancel()
		r := <-done
		if ctx.Err() != nil {
			t.Fatalf("the child test %s (%s=%s) did not end within %v:\n%s", run, env, value, limit, r.out)
		}
		return string(r.out), r.err == nil
	}
}

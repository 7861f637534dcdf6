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
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+value)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the child test %s (%s=%s) did not end within %v:\n%s", run, env, value, limit, out)
	}
	return string(out), err == nil
}

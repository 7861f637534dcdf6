package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

// CheckTimeout bounds Main's check of one service: long enough for a
// loaded machine to answer, short enough that a URL pointing at nothing
// fails the package in seconds.
const CheckTimeout = 3 * time.Second

// Main runs the tests of a package that needs services, and exits; call it
// from the package's TestMain as testenv.Main(m, testenv.Redis). Before
// any test runs it looks at each service's variable:
//
//   - set: the service is checked once (see CheckTimeout); if it cannot
//     be reached or refuses the URL, one line "FAIL <package>:
//     <variable>=<URL, password hidden> ...: <error>" is printed and the
//     package fails without running a test;
//   - unset, under SAFERETRY_REQUIRE_SERVICES=1: one FAIL line saying so,
//     and the package fails without running a test;
//   - unset otherwise: the tests run, those that need the service skip
//     (each says how to run it), and one line "SKIP <package>: <variable>
//     is not set; N tests skipped ..." is printed after them.
//
// Where that SKIP line shows: plain `go test ./...` (package list mode)
// throws away everything a passing test binary prints, stdout and stderr
// alike, and shows only "ok <package> <time>" (cmd/go adds " [no tests to
// run]" or a coverage figure only when it finds those in the output); no
// line a test binary prints can reach that listing. The SKIP line shows
// with -v (`go test -v ./... | grep -E '^(SKIP|ok|FAIL)'` lists every
// package with its skips), in -json output, when a single package is
// tested from its own directory (`go test` with no arguments), and above
// the FAIL of a package that fails. The FAIL lines always show.
func Main(m *testing.M, services ...Service) {
	os.Exit(runMain(m.Run, os.Stdout, services))
}

// runMain is Main without the exit: run runs the tests, out gets the
// package's FAIL or SKIP lines; it returns the exit code.
func runMain(run func() int, out io.Writer, services []Service) int {
	pkg := packagePath()
	var unset []Service
	failed := false
	for _, s := range services {
		u := os.Getenv(s.env)
		switch {
		case u == "" && RequireServices():
			fmt.Fprintf(out, "FAIL %s: %s is not set and %s=1; set %s='%s'\n",
				pkg, s.env, EnvRequireServices, s.env, s.example)
			failed = true
		case u == "":
			unset = append(unset, s)
		default:
			ctx, cancel := context.WithTimeout(context.Background(), CheckTimeout)
			err := s.check(ctx, u)
			cancel()
			if err != nil {
				// pgx puts each address tried on a line of its own (a URL
				// without sslmode tries TLS, then plain): joined, the
				// cause stays on the FAIL line, which grep '^FAIL' shows.
				fmt.Fprintf(out, "FAIL %s: %s=%s failed its check before any test ran: %s\n",
					pkg, s.env, redact(u), strings.Join(strings.Fields(err.Error()), " "))
				failed = true
			}
		}
	}
	if failed {
		return 1
	}
	code := run()
	for _, s := range unset {
		n := skipped.count(s.env)
		if n == 0 {
			continue
		}
		them := "them"
		if n == 1 {
			them = "it"
		}
		fmt.Fprintf(out, "SKIP %s: %s is not set; %s skipped (set %s='%s' to run %s)\n",
			pkg, s.env, plural(n, "test"), s.env, s.example, them)
	}
	return code
}

// packagePath returns the import path of the package under test, as the
// go command names it in its ok and FAIL lines.
func packagePath() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Path != "" {
		return strings.TrimSuffix(bi.Path, ".test")
	}
	return "this package"
}

func plural(n int, what string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// skipped records, for each variable, the top-level tests that skipped for
// want of it: Main counts them for the package's SKIP line.
var skipped skipLog

type skipLog struct {
	mu    sync.Mutex
	tests map[string]map[string]bool // variable -> top-level test name
}

func (l *skipLog) add(env, test string) {
	top, _, _ := strings.Cut(test, "/")
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tests == nil {
		l.tests = map[string]map[string]bool{}
	}
	if l.tests[env] == nil {
		l.tests[env] = map[string]bool{}
	}
	l.tests[env][top] = true
}

func (l *skipLog) count(env string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.tests[env])
}

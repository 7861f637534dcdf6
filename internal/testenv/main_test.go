package testenv

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// envChild makes the TestChild tests run, not skip: they stand for the
// tests of a package that needs Redis and PostgreSQL, in a child process
// of the TestMain tests.
const envChild = "SAFERETRY_TESTENV_CHILD"

// TestMain: this package needs the services as well (and its TestMain
// tests need a TestMain that calls Main in their child processes).
func TestMain(m *testing.M) { Main(m, Redis, Postgres) }

// TestChildRedis has two subtests that need Redis: it counts once.
func TestChildRedis(t *testing.T) {
	childOnly(t)
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) { RedisURL(t) })
	}
}

func TestChildRedisToo(t *testing.T) { childOnly(t); RedisURL(t) }

func TestChildPostgres(t *testing.T) { childOnly(t); PostgresURL(t) }

func TestChildNeedsNothing(t *testing.T) { childOnly(t) }

func childOnly(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("run by the TestMain tests only")
	}
}

// runChild runs this test binary as a package needing Redis and
// PostgreSQL, its tests verbose, with env added to the environment minus
// the service variables; it returns the output and the exit code.
func runChild(t *testing.T, env ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestChild", "-test.v", "-test.count=1")
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case EnvRedisURL, EnvPostgresURL, EnvRequireServices:
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, append([]string{envChild + "=1"}, env...)...)
	if os.Getenv("GORACE") == "" {
		// The race detector otherwise waits a second at exit.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("run child: %v\n%s", err, out)
	return "", 0
}

// linesWith returns the lines of out that start with prefix.
func linesWith(out, prefix string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			got = append(got, l)
		}
	}
	return got
}

const pkg = "github.com/saferetry/saferetry/internal/testenv"

// TestMainSkipSummary: with the variables unset the package passes, each
// test that needs a service skips saying how to run it, and the package
// prints one SKIP line per variable, counting top-level tests.
func TestMainSkipSummary(t *testing.T) {
	out, code := runChild(t)
	want := []string{
		"SKIP " + pkg + ": SAFERETRY_REDIS_URL is not set; 2 tests skipped (set SAFERETRY_REDIS_URL='" + ExampleRedisURL + "' to run them)",
		"SKIP " + pkg + ": SAFERETRY_POSTGRES_URL is not set; 1 test skipped (set SAFERETRY_POSTGRES_URL='" + ExamplePostgresURL + "' to run it)",
	}
	if got := linesWith(out, "SKIP "); code != 0 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("exit %d, SKIP lines:\n%s\nwant exit 0 and:\n%s\nwhole output:\n%s",
			code, strings.Join(got, "\n"), strings.Join(want, "\n"), out)
	}
	for _, s := range []string{
		"--- SKIP: TestChildRedis/a", "--- SKIP: TestChildRedis/b", "--- SKIP: TestChildRedisToo",
		"--- SKIP: TestChildPostgres", "--- PASS: TestChildNeedsNothing",
		"set SAFERETRY_REDIS_URL='" + ExampleRedisURL + "' to run",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// TestMainRequiredButUnset: under SAFERETRY_REQUIRE_SERVICES=1 each unset
// variable is one FAIL line, and the package fails before any test runs.
func TestMainRequiredButUnset(t *testing.T) {
	out, code := runChild(t, EnvRequireServices+"=1")
	if strings.Contains(out, "=== RUN") || code != 1 {
		t.Fatalf("exit %d; want 1 with no test run:\n%s", code, out)
	}
	want := []string{
		"FAIL " + pkg + ": SAFERETRY_REDIS_URL is not set and SAFERETRY_REQUIRE_SERVICES=1; set SAFERETRY_REDIS_URL='" + ExampleRedisURL + "'",
		"FAIL " + pkg + ": SAFERETRY_POSTGRES_URL is not set and SAFERETRY_REQUIRE_SERVICES=1; set SAFERETRY_POSTGRES_URL='" + ExamplePostgresURL + "'",
	}
	if got := linesWith(out, "FAIL "+pkg); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("FAIL lines:\n%s\nwant:\n%s\nwhole output:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), out)
	}
}

// TestMainWrongURLFailsFast: a set URL where nothing listens fails the
// package before any test runs, with one line per service naming the
// variable, the URL without its password, and the dial error; go-redis's
// pool logs nothing.
func TestMainWrongURLFailsFast(t *testing.T) {
	port := closedPort(t)
	out, code := runChild(t,
		EnvRedisURL+"=redis://:hunter2@127.0.0.1:"+port+"/0",
		EnvPostgresURL+"=postgres://postgres:hunter2@127.0.0.1:"+port+"/test?sslmode=disable")
	if strings.Contains(out, "=== RUN") || code != 1 {
		t.Fatalf("exit %d; want 1 with no test run:\n%s", code, out)
	}
	got := linesWith(out, "FAIL "+pkg+": ")
	if len(got) != 2 ||
		!strings.HasPrefix(got[0], "FAIL "+pkg+": SAFERETRY_REDIS_URL=redis://:xxxxx@127.0.0.1:"+port+"/0 failed its check") ||
		!strings.HasPrefix(got[1], "FAIL "+pkg+": SAFERETRY_POSTGRES_URL=postgres://postgres:xxxxx@127.0.0.1:"+port+"/test?sslmode=disable failed its check") {
		t.Errorf("FAIL lines:\n%s\nwant one for Redis, then one for PostgreSQL:\n%s", strings.Join(got, "\n"), out)
	}
	for _, l := range got {
		if !strings.Contains(l, "connection refused") {
			t.Errorf("line %q does not give the dial error", l)
		}
	}
	if strings.Contains(out, "hunter2") || strings.Contains(out, "pool.go") {
		t.Errorf("output shows the password or go-redis pool logs:\n%s", out)
	}
}

// TestMainWrongURLOneLine: pgx reports a failed connection to a URL
// without sslmode (which tries TLS, then plain) over several lines; the
// package's FAIL line still holds the whole error, so that `go test -v
// ./... | grep -E '^(SKIP|ok|FAIL)'`, as the README says, shows why.
func TestMainWrongURLOneLine(t *testing.T) {
	port := closedPort(t)
	out, code := runChild(t, EnvPostgresURL+"=postgres://postgres@127.0.0.1:"+port+"/test")
	got := linesWith(out, "FAIL "+pkg+": ")
	if code != 1 || len(got) != 1 || !strings.Contains(got[0], "connection refused") {
		t.Errorf("exit %d, FAIL lines %q; want 1 and one line with the dial error:\n%s", code, got, out)
	}
}

// TestMainChecksMoreThanTheAddress: a server that listens but refuses the
// URL's password, database number or database fails the package too. It
// needs the real services.
func TestMainChecksMoreThanTheAddress(t *testing.T) {
	redisURL, pgURL := RedisURL(t), PostgresURL(t)
	for _, tc := range []struct {
		name, env, url, want string
	}{
		{"redis database", EnvRedisURL, withPath(t, redisURL, "/99"), "DB index is out of range"},
		{"postgres database", EnvPostgresURL, withPath(t, pgURL, "/"+RandomName("nosuchdb_")), "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := map[string]string{EnvRedisURL: redisURL, EnvPostgresURL: pgURL}
			other[tc.env] = tc.url
			out, code := runChild(t, EnvRedisURL+"="+other[EnvRedisURL], EnvPostgresURL+"="+other[EnvPostgresURL])
			got := linesWith(out, "FAIL "+pkg+": ")
			if code != 1 || strings.Contains(out, "=== RUN") || len(got) != 1 ||
				!strings.HasPrefix(got[0], "FAIL "+pkg+": "+tc.env+"=") || !strings.Contains(got[0], tc.want) {
				t.Errorf("exit %d, FAIL lines %q; want 1 and one line on %s saying %q:\n%s", code, got, tc.env, tc.want, out)
			}
		})
	}
}

// TestMainServicesUp: with both services answering, the tests run and
// the package passes without a SKIP or FAIL line of Main's.
func TestMainServicesUp(t *testing.T) {
	out, code := runChild(t, EnvRedisURL+"="+RedisURL(t), EnvPostgresURL+"="+PostgresURL(t), EnvRequireServices+"=1")
	if code != 0 || len(linesWith(out, "SKIP ")) > 0 || len(linesWith(out, "FAIL ")) > 0 ||
		!strings.Contains(out, "--- PASS: TestChildRedis/a") {
		t.Fatalf("exit %d; want 0, the tests run and no line of Main's:\n%s", code, out)
	}
}

// closedPort returns a loopback port nothing listens on (for now).
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

func withPath(t *testing.T, raw, path string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = path
	return u.String()
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://:secret@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		{"postgres://u:secret@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgres://u@h/db?password=secret&sslmode=disable", "postgres://u@h/db?password=xxxxx&sslmode=disable"},
		{"host=h user=u password=secret dbname=db", "host=h user=u password=xxxxx dbname=db"},
		{"host=h password='se cret' dbname=db", "host=h password=xxxxx dbname=db"},
		{"redis://:secret@h:%zz/0", "(not shown: not a URL)"},
	} {
		if got := redact(tc.in); got != tc.want {
			t.Errorf("redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

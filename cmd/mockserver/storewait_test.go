package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testenv"
)

// lateStart is how long after the mock server a test's PostgreSQL comes
// up.
const lateStart = 400 * time.Millisecond

// lateRedis is how long after the mock server a test's Redis comes up:
// longer than go-redis's own retries of a refused connection within one
// Ping of a default client (five dials and three retries of the command,
// about 1.7 s), which the start's attempts no longer make.
const lateRedis = 2500 * time.Millisecond

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startRedisLater starts a redis-server of the test's own on addr after d,
// without persistence, and kills it when the test ends.
func startRedisLater(t *testing.T, addr string, d time.Duration) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH")
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--dir", t.TempDir())
	started := make(chan error, 1)
	timer := time.AfterFunc(d, func() { started <- cmd.Start() })
	t.Cleanup(func() {
		if !timer.Stop() {
			if err := <-started; err == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}
	})
}

// postgresVia returns the test database's URL with its host:port replaced
// by addr.
func postgresVia(t *testing.T, addr string) string {
	t.Helper()
	u, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// servesAfterWaiting checks that a mock server that met its store down
// serves a payment once up, and said on stderr that it was retrying.
func servesAfterWaiting(t *testing.T, u string, stderr *lines, stop func() error) {
	t.Helper()
	if resp := post(t, u, "late-store-1"); resp.StatusCode != http.StatusCreated {
		t.Errorf("payment after the store came up: %d, want 201", resp.StatusCode)
	}
	if err := stop(); err != nil {
		t.Errorf("run: %v", err)
	}
	if !strings.Contains(stderr.String(), "retrying") {
		t.Errorf("stderr %q does not say that it retried the store", stderr.String())
	}
}

// TestRedisStartingLateIsWaitedFor: a mock server started before its Redis
// (docker-compose, CI, the chaos suite's Redis restart) waits for it, by
// default, and serves once it is up.
func TestRedisStartingLateIsWaitedFor(t *testing.T) {
	addr := closedAddr(t)
	startRedisLater(t, addr, lateRedis)
	u, _, stderr, stop := startCapturing(t, "-store", "redis://"+addr+"/0", "-namespace", testenv.RandomName("late"))
	servesAfterWaiting(t, u, stderr, stop)
}

// TestPostgresStartingLateIsWaitedFor: a mock server whose PostgreSQL is
// not listening yet, or resets its connections (a cut while it creates its
// schema, a server still starting), waits for it, by default, and serves
// once it is reachable.
func TestPostgresStartingLateIsWaitedFor(t *testing.T) {
	target, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		down, healed func(*testenv.Proxy)
	}{
		{"not listening", func(p *testenv.Proxy) { p.Stop() }, func(p *testenv.Proxy) { p.Restart(t) }},
		{"connections reset", func(p *testenv.Proxy) { p.SetRefuse(true) }, func(p *testenv.Proxy) { p.SetRefuse(false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testenv.StartProxy(t, target.Host)
			tc.down(p)
			table := testenv.RandomName("late_")
			t.Cleanup(func() { dropTables(t, testenv.PostgresURL(t), table) })
			heal := time.AfterFunc(lateStart, func() { tc.healed(p) })
			defer heal.Stop()
			u, _, stderr, stop := startCapturing(t, "-store", postgresVia(t, p.Addr()), "-table", table)
			servesAfterWaiting(t, u, stderr, stop)
		})
	}
}

// runFails runs the mock server, which must fail within limit, and returns
// its standard error and its error.
func runFails(t *testing.T, limit time.Duration, args ...string) (string, error) {
	t.Helper()
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), limit+5*time.Second)
	defer cancel()
	began := time.Now()
	err := run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), &bytes.Buffer{}, &stderr)
	if took := time.Since(began); took > limit {
		t.Errorf("run %q took %v to fail, want at most %v", args, took, limit)
	}
	if err == nil {
		t.Fatalf("run %q: no error", args)
	}
	return stderr.String(), err
}

// TestStoreWaitZeroFailsAtOnce: -store-wait 0 keeps failing at the first
// attempt when the store cannot be reached.
func TestStoreWaitZeroFailsAtOnce(t *testing.T) {
	for _, store := range []string{"redis://" + closedAddr(t) + "/0", postgresVia(t, closedAddr(t))} {
		stderr, err := runFails(t, 5*time.Second, "-store", store, "-store-wait", "0")
		if !strings.Contains(err.Error(), "refused") || strings.Contains(stderr, "retrying") {
			t.Errorf("-store %s -store-wait 0: %v (stderr %q), want the refused connection and no retry", store, err, stderr)
		}
	}
}

// TestPermanentStoreErrorsFailAtOnce: what waiting cannot cure (a bad URL,
// a database or role that does not exist, a Redis database out of range, a
// namespace refused by validation) fails at once, whatever -store-wait.
func TestPermanentStoreErrorsFailAtOnce(t *testing.T) {
	pg, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	noDB := *pg
	noDB.Path = "/" + testenv.RandomName("nosuchdb_")
	noRole := *pg
	noRole.User = url.User(testenv.RandomName("nosuchrole_"))
	rd, err := url.Parse(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rd.Path = "/999999"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-store", noDB.String()}, "3D000"},
		{[]string{"-store", noRole.String()}, "28000"},
		{[]string{"-store", rd.String()}, "DB index"},
		{[]string{"-store", "redis://127.0.0.1:notaport/0"}, "-store"},
		{[]string{"-store", "postgres://127.0.0.1:notaport/x"}, "-store"},
		{[]string{"-store", "redis://" + closedAddr(t) + "/0", "-namespace", "a{b}"}, "-namespace"},
	} {
		stderr, err := runFails(t, 5*time.Second, append(tc.args, "-store-wait", "20s")...)
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(stderr, "retrying") {
			t.Errorf("run %q: %v (stderr %q), want an error about %s and no retry", tc.args, err, stderr, tc.want)
		}
	}
}

// TestStoreWaitEnds: a store that does not come up within -store-wait
// fails the start with its last error, after one retry line per failed
// attempt on stderr. Over Redis too, whose client retries a refused dial
// and its command by itself for longer than an attempt may take: its own
// retries must neither eat the wait (one attempt, no retry line) nor
// leave the attempt's deadline as the error in place of the refusal.
func TestStoreWaitEnds(t *testing.T) {
	const wait = 1500 * time.Millisecond
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"redis", func(t *testing.T) string { return "redis://" + closedAddr(t) + "/0" }},
		{"postgres", func(t *testing.T) string { return postgresVia(t, closedAddr(t)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			stderr, err := runFails(t, 5*time.Second, "-store", tc.store(t), "-store-wait", wait.String())
			if took := time.Since(began); took < wait {
				t.Errorf("gave up after %v, before the -store-wait of %v", took, wait)
			}
			if !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "-store-wait") {
				t.Errorf("error %q: want the refused connection and the wait that ended", err)
			}
			retries := strings.Count(stderr, "\n")
			if retries < 2 || strings.Count(stderr, "refused") != retries || strings.Count(stderr, "retrying in") != retries {
				t.Errorf("stderr %q: want a line per failed attempt, each with its error and the retry", stderr)
			}
		})
	}
}

// silentAddr returns a loopback address that accepts connections and
// never answers on them, as a store whose port is open but whose server
// is not serving yet (a proxy in front of it, a process stopped).
func silentAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 64)
	go func() {
		defer close(conns)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestInterruptDuringStoreWait: a signal (ctx cancelled) while an attempt
// waits for a store that accepted the connection but does not answer ends
// the start at once, not when the attempt's own 5 s run out. pgx watches
// its context; go-redis bounds its reads by the context's deadline only.
func TestInterruptDuringStoreWait(t *testing.T) {
	addr := silentAddr(t)
	for _, store := range []string{"redis://" + addr + "/0", postgresVia(t, addr)} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		began := time.Now()
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-store", store, "-store-wait", "20s"}, &bytes.Buffer{}, &bytes.Buffer{})
		if took := time.Since(began); err == nil || took > 2*time.Second {
			t.Errorf("-store %s cancelled after 300ms: returned %v after %v, want an error within 2s", store, err, took)
		}
		cancel()
	}
}

// TestStoreWaitBoundsItsAttempts: against a store that accepts
// connections and never answers, each attempt had its own 5 s, so a
// -store-wait of 600ms gave up after more than 5 s, and the chaos
// harness's 10 s reached its 15 s start timeout. An attempt now ends
// with the wait, given at least a second (a dial's chance): the start
// fails within the wait and that second.
func TestStoreWaitBoundsItsAttempts(t *testing.T) {
	addr := silentAddr(t)
	const wait = 600 * time.Millisecond
	for _, store := range []string{"redis://" + addr + "/0", postgresVia(t, addr)} {
		began := time.Now()
		_, err := runFails(t, wait+time.Second+500*time.Millisecond, "-store", store, "-store-wait", wait.String())
		if took := time.Since(began); took < wait {
			t.Errorf("-store %s: gave up after %v, before the -store-wait of %v", store, took, wait)
		}
		if !strings.Contains(err.Error(), "-store-wait") {
			t.Errorf("-store %s: error %q, want the wait that ended", store, err)
		}
	}
}

// TestRedissToPlainRedisSaysTLS: a rediss:// store URL that names a Redis
// without TLS fails the start at once, saying that the TLS handshake
// failed, rather than waiting out -store-wait on a handshake the server
// never answers and then reporting a deadline.
func TestRedissToPlainRedisSaysTLS(t *testing.T) {
	u, err := url.Parse(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme = "rediss"
	stderr, err := runFails(t, 5*time.Second, "-store", u.String(), "-store-wait", "20s")
	if msg := err.Error(); !strings.Contains(msg, "TLS handshake failed") || !strings.Contains(msg, "without TLS") || strings.Contains(stderr, "retrying") {
		t.Errorf("-store %s: %v (stderr %q), want a failed TLS handshake, the server without TLS, and no retry", u, err, stderr)
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// lines collects what run prints and hands over the URL of the startup line.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
	url chan string
}

var urlRE = regexp.MustCompile(`listening on (http://\S+)`)

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	if m := urlRE.FindSubmatch(p); m != nil {
		l.url <- string(m[1])
	}
	return len(p), nil
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// start runs the binary's run in the background and returns its URL, its
// standard output and a stop function that shuts it down and returns run's
// error.
func start(t *testing.T, args ...string) (string, *lines, func() error) {
	t.Helper()
	url, out, _, stop := startCapturing(t, args...)
	return url, out, stop
}

// startCapturing is start that returns the standard error too.
func startCapturing(t *testing.T, args ...string) (url string, stdout, stderr *lines, stop func() error) {
	t.Helper()
	out := &lines{url: make(chan string, 1)}
	errOut := &lines{url: make(chan string, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), out, errOut) }()
	select {
	case u := <-out.url:
		return u, out, errOut, func() error { cancel(); return <-done }
	case err := <-done:
		cancel()
		t.Fatalf("run ended before listening: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("no startup line after 10s")
	}
	return "", nil, nil, nil
}

func post(t *testing.T, url, key string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/payments", strings.NewReader(`{"amount":10,"currency":"EUR","recipient":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestBalanceAndUnkeyedFlags: -balance sets an opening balance, and
// -unkeyed-payments is reported in the startup line.
func TestBalanceAndUnkeyedFlags(t *testing.T) {
	url, out, stop := start(t, "-balance", "eur=70", "-balance", "JPY=3", "-unkeyed-payments")
	defer stop()
	if !strings.Contains(out.String(), "unkeyed payments") {
		t.Errorf("startup line %q does not say the payments are unkeyed", out.String())
	}
	var bal struct{ Balances map[string]int64 }
	getJSON(t, url+"/balance", &bal)
	if bal.Balances["EUR"] != 70 || bal.Balances["JPY"] != 3 {
		t.Errorf("balances %v, want EUR 70 and JPY 3", bal.Balances)
	}
	if resp := post(t, url, "bal-1"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("payment of 10 from 70: %d", resp.StatusCode)
	}
	getJSON(t, url+"/balance?currency=EUR", &bal)
	if bal.Balances["EUR"] != 60 {
		t.Errorf("EUR after a payment of 10: %d, want 60", bal.Balances["EUR"])
	}
}

func TestRunServesAndShutsDown(t *testing.T) {
	url, out, stop := start(t, "-ttl", "1h", "-lease", "2s")
	if !strings.Contains(out.String(), "store memory, mode lease, keyed payments, ttl 1h0m0s, lease 2s") {
		t.Errorf("startup line: %q", out.String())
	}
	if resp := post(t, url, "cmd-1"); resp.StatusCode != 201 {
		t.Errorf("first POST: %d", resp.StatusCode)
	}
	if resp := post(t, url, "cmd-1"); resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("second POST: %d replayed=%q", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
	if err := stop(); err != nil {
		t.Errorf("run: %v", err)
	}
	if !strings.Contains(out.String(), "shutting down") {
		t.Errorf("output: %q", out.String())
	}
	if _, err := http.Get(url + "/balance"); err == nil {
		t.Error("server still answers after shutdown")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-store", "mysql://localhost/x"},
		{"-ttl", "0s"},
		{"-lease", "-1s"},
		{"-wait", "-1s"},
		{"-nosuchflag"},
		{"extra"},
		{"-addr", "256.0.0.1:http"},
		{"-table", "entries"},
		{"-store", "redis://127.0.0.1:1/0", "-table", "entries"},
		{"-store", "postgres://127.0.0.1:1/x", "-table", "Bad-Name"},
		{"-max-entries", "0"},
		{"-max-bytes", "-1"},
		{"-mode", "sometimes"},
		{"-mode", "tx"}, // the memory store has no transactions
		{"-store", "redis://127.0.0.1:1/0", "-mode", "tx"},
		{"-balance", "EUR"},
		{"-balance", "EURO=5"},
		{"-balance", "E1R=5"},
		{"-balance", "EUR=-5"},
		{"-balance", "EUR=5x"},
		{"-store", "redis://127.0.0.1:1/0", "-namespace", "a{b}"},
		{"-admin=maybe"},
		{"-admin", "false"}, // a bool flag takes its value after "="
		{"-read-timeout", "-1s"},
		{"-idle-timeout", "-1ms"},
		{"-replay-fast-path"}, // the memory store has no fast path
	} {
		if err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("run %q: no error", args)
		}
	}
}

// TestRunRefusesMemoryBoundsForOtherStores: -max-entries and -max-bytes
// shape the memory store only, and say so before any connection is tried.
func TestRunRefusesMemoryBoundsForOtherStores(t *testing.T) {
	for _, args := range [][]string{
		{"-store", "redis://127.0.0.1:1/0", "-max-entries", "10"},
		{"-store", "redis://127.0.0.1:1/0", "-max-bytes", "1000000"},
		{"-store", "postgres://127.0.0.1:1/x", "-max-entries", "10", "-max-bytes", "1000000"},
	} {
		err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "applies to the memory store only") {
			t.Errorf("run %q = %v, want an error saying the flag applies to the memory store only", args, err)
		}
	}
}

// TestMaxEntriesFlagTakesEffect: with -max-entries 2 the third new key is
// refused with 503 and nothing runs, while the first two still replay.
func TestMaxEntriesFlagTakesEffect(t *testing.T) {
	url, _, stop := start(t, "-max-entries", "2")
	defer stop()
	for _, key := range []string{"bound-1", "bound-2"} {
		if resp := post(t, url, key); resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %d, want 201", key, resp.StatusCode)
		}
	}
	resp := post(t, url, "bound-3")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("POST of a third key: %d Retry-After=%q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := post(t, url, "bound-1"); resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay at the bound: %d replayed=%q", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
	var st struct {
		Executions int `json:"executions"`
	}
	getJSON(t, url+"/_mock/keys/bound-3", &st)
	if st.Executions != 0 {
		t.Errorf("the refused key executed %d times, want 0", st.Executions)
	}
}

// TestMaxBytesFlagTakesEffect: a byte bound too small for any entry makes
// the first key get 503.
func TestMaxBytesFlagTakesEffect(t *testing.T) {
	url, _, stop := start(t, "-max-bytes", "100")
	defer stop()
	if resp := post(t, url, "tiny-1"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("POST with -max-bytes 100: %d, want 503", resp.StatusCode)
	}
}

// TestRedisSettingsWarnings: at start on a Redis store, each problem
// redisstore's Check finds is one warning line on stderr, and the server
// serves all the same. The shared test Redis runs without persistence.
func TestRedisSettingsWarnings(t *testing.T) {
	u := testenv.RedisURL(t)
	problems, err := redisstore.New(testenv.RedisClient(t)).Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(problems) == 0 {
		t.Skip("the shared Redis persists and does not evict: nothing to warn about")
	}
	url, _, stderr, stop := startCapturing(t, "-store", u, "-namespace", redisNamespace(t))
	defer stop()
	var want []string
	for _, p := range problems {
		want = append(want, "mockserver: warning: redis "+p.String())
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if strings.HasPrefix(l, "mockserver: warning: ") {
			got = append(got, l)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if resp := post(t, url, "warned-1"); resp.StatusCode != http.StatusCreated {
		t.Errorf("POST after the warnings: %d, want 201", resp.StatusCode)
	}
}

// Two binaries on one shared store with one namespace act as one service,
// and answer from one ledger.
func testSharedStore(t *testing.T, store, wantName string, extra ...string) {
	ns := testenv.RandomName("cmdtest-")
	if strings.HasPrefix(store, "redis") {
		ns = redisNamespace(t)
	}
	args := append([]string{"-store", store, "-namespace", ns, "-ttl", "1m", "-balance", "EUR=5000"}, extra...)
	urlA, outA, stopA := start(t, args...)
	defer stopA()
	urlB, _, stopB := start(t, args...)
	defer stopB()
	if !strings.Contains(outA.String(), wantName) {
		t.Errorf("startup line %q lacks %q", outA.String(), wantName)
	}
	if resp := post(t, urlA, "shared-1"); resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("POST to A: %d", resp.StatusCode)
	}
	if resp := post(t, urlB, "shared-1"); resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("POST to B: %d replayed=%q", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
	if resp := post(t, urlB, "shared-2"); resp.StatusCode != 201 {
		t.Errorf("second payment, to B: %d", resp.StatusCode)
	}
	for _, u := range []string{urlA, urlB} {
		var ps []mockserver.Payment
		getJSON(t, u+"/payments", &ps)
		if len(ps) != 2 || ps[0].IdempotencyKey != "shared-1" || ps[1].IdempotencyKey != "shared-2" {
			t.Errorf("GET %s/payments = %+v, want the two payments made on A and B", u, ps)
		}
		var bal struct{ Balances map[string]int64 }
		getJSON(t, u+"/balance?currency=EUR", &bal)
		if bal.Balances["EUR"] != 5000-20 {
			t.Errorf("GET %s/balance = %v, want EUR 4980 (opening 5000, two payments of 10)", u, bal.Balances)
		}
	}
}

// redisNamespace returns a -namespace of t's own for binaries over the
// shared Redis, and deletes at the end of t what they wrote there under
// it: the ledger under its prefix and the idempotency entries of its
// scopes. Stop the binaries first (a defer in t does).
func redisNamespace(t *testing.T) string {
	t.Helper()
	ns := testenv.RandomName("cmdtest-")
	rdb := testenv.RedisClient(t) // closed after the cleanup below, which is registered later
	t.Cleanup(func() {
		keys := testenv.RedisKeys(t, rdb, "saferetry:mock:"+ns+":")
		for _, k := range testenv.RedisKeys(t, rdb, "saferetry:idem:") {
			if strings.Contains(k, ":"+ns+"/epoch-") {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 {
			if err := rdb.Unlink(context.Background(), keys...).Err(); err != nil {
				t.Errorf("cleanup of namespace %s: %v", ns, err)
			}
		}
	})
	return ns
}

func TestRunWithRedis(t *testing.T) {
	u := testenv.RedisURL(t)
	t.Run("default", func(t *testing.T) { testSharedStore(t, u, "store redis") })
	t.Run("replay fast path", func(t *testing.T) {
		testSharedStore(t, u, "mode lease with replay fast path", "-replay-fast-path")
	})
}

func TestRunWithPostgres(t *testing.T) {
	u := testenv.PostgresURL(t)
	// A table of its own, dropped at the end: the database is shared.
	table := testenv.RandomName("cmdtest_")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pool, err := pgxpool.New(ctx, u)
		if err != nil {
			t.Errorf("drop %s: %v", table, err)
			return
		}
		defer pool.Close()
		for _, tb := range []string{table, table + "_payments", table + "_balances"} {
			if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS "`+tb+`"`); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
	})
	for _, mode := range []string{"tx", "lease"} {
		t.Run(mode, func(t *testing.T) {
			testSharedStore(t, u, "store postgres table "+table+", mode "+mode, "-table", table, "-mode", mode)
			dropLedger(t, u, table)
		})
	}
	for _, mode := range []string{"tx", "lease"} {
		t.Run(mode+" with replay fast path", func(t *testing.T) {
			testSharedStore(t, u, "mode "+mode+" with replay fast path", "-table", table, "-mode", mode, "-replay-fast-path")
			dropLedger(t, u, table)
		})
	}
}

// dropLedger empties the ledger tables named after table, and drops them
// at the end.
func dropLedger(t *testing.T, u, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	led := pgledger.New(pool, table, nil)
	if err := led.DropSchema(ctx); err != nil {
		t.Errorf("drop the ledger of %s: %v", table, err)
	}
}

// TestShutdownAnswersRequestsInFlight: a request executing when the signal
// comes is answered before run returns.
func TestShutdownAnswersRequestsInFlight(t *testing.T) {
	url, _, stop := start(t)
	answered := paymentInFlight(t, url, "in-flight-1")
	if err := stop(); err != nil {
		t.Errorf("run: %v", err)
	}
	// Had the server closed without answering, the client would have got a
	// connection error (status 0) rather than the payment.
	select {
	case status := <-answered:
		if status != http.StatusCreated {
			t.Errorf("request in flight during shutdown got %d, want 201", status)
		}
	case <-time.After(10 * time.Second):
		t.Error("the request in flight was never answered")
	}
}

// getJSON decodes the JSON answer of GET url into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// waitDelayStarted waits until the injected delay was taken by a request.
func waitDelayStarted(t *testing.T, url string) {
	t.Helper()
	testenv.Eventually(t, "the delayed request starts", func() bool {
		var f struct {
			DelayMS []int64 `json:"delay_ms"`
		}
		getJSON(t, url+"/_mock/faults", &f)
		return len(f.DelayMS) == 0
	})
}

// paymentInFlight injects a 300 ms delay, sends a payment with key in the
// background and returns once the delay holds it. The channel gets the
// payment's status, 0 on a connection error.
func paymentInFlight(t *testing.T, url, key string) <-chan int {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/_mock/delay", strings.NewReader(`{"count":1,"delay_ms":300}`))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("inject delay: %v %v", resp, err)
	}
	status := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", url+"/payments", strings.NewReader(`{"amount":10,"currency":"EUR","recipient":"a"}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	waitDelayStarted(t, url)
	return status
}

// TestWaitFlagTakesEffect: with -wait a duplicate that meets a slow
// execution waits for it and gets its replay instead of 409.
func TestWaitFlagTakesEffect(t *testing.T) {
	url, _, stop := start(t, "-wait", "5s")
	defer stop()
	first := paymentInFlight(t, url, "wait-1")
	if resp := post(t, url, "wait-1"); resp.StatusCode != 201 || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("duplicate during the execution: %d replayed=%q, want the replayed 201 (-wait 5s)", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
	if status := <-first; status != 201 {
		t.Errorf("original: %d, want 201", status)
	}
	var st struct {
		Attempts   int `json:"attempts"`
		Executions int `json:"executions"`
	}
	getJSON(t, url+"/_mock/keys/wait-1", &st)
	if st.Attempts != 2 || st.Executions != 1 {
		t.Errorf("wait-1: %d attempts, %d executions; want 2 and 1", st.Attempts, st.Executions)
	}
}

// TestTTLFlagTakesEffect: once -ttl has passed, the same key executes again.
func TestTTLFlagTakesEffect(t *testing.T) {
	url, _, stop := start(t, "-ttl", "200ms", "-lease", "200ms")
	defer stop()
	if resp := post(t, url, "ttl-1"); resp.StatusCode != 201 {
		t.Fatalf("first POST: %d", resp.StatusCode)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := post(t, url, "ttl-1")
		if resp.StatusCode == 201 && resp.Header.Get("Idempotent-Replayed") == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the key still replays 10s after a 200ms ttl")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var st struct {
		Executions int `json:"executions"`
	}
	getJSON(t, url+"/_mock/keys/ttl-1", &st)
	if st.Executions != 2 {
		t.Errorf("ttl-1 executed %d times, want 2 (once, then again after the ttl)", st.Executions)
	}
}

// envRunMain makes the test binary run main instead of the tests, with the
// arguments in envMainArgs: TestSignalsShutDownGracefully starts the real
// binary that way and signals it.
const (
	envRunMain  = "SAFERETRY_MOCKSERVER_RUN_MAIN"
	envMainArgs = "SAFERETRY_MOCKSERVER_ARGS"
)

// TestMain runs main when envRunMain says so, and otherwise the tests,
// after testenv.Main has checked the test Redis and database once.
func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		os.Args = append([]string{"mockserver"}, strings.Fields(os.Getenv(envMainArgs))...)
		main()
		os.Exit(0)
	}
	testenv.Main(m, testenv.Redis, testenv.Postgres, testenv.RedisCluster)
}

// TestSignalsShutDownGracefully runs main in a child process and sends it
// SIGINT or SIGTERM while a payment is executing: the payment is answered,
// the process says it is shutting down and exits 0.
func TestSignalsShutDownGracefully(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envRunMain+"=1", envMainArgs+"=-addr 127.0.0.1:0")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = io.Discard
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			lines := make(chan string, 8)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
				exited <- cmd.Wait()
			}()
			var url string
			select {
			case l := <-lines:
				m := urlRE.FindStringSubmatch(l)
				if m == nil {
					t.Fatalf("startup line %q has no URL", l)
				}
				url = m[1]
			case <-ctx.Done():
				t.Fatal("no startup line")
			}

			answered := paymentInFlight(t, url, "signal-1")
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if status := <-answered; status != http.StatusCreated {
				t.Errorf("payment in flight at %v got %d, want 201", sig, status)
			}
			var rest []string
			for l := range lines {
				rest = append(rest, l)
			}
			if err := <-exited; err != nil {
				t.Errorf("process after %v: %v, want exit status 0", sig, err)
			}
			if !strings.Contains(strings.Join(rest, "\n"), "shutting down") {
				t.Errorf("output after %v: %q, want the shutdown line", sig, rest)
			}
		})
	}
}

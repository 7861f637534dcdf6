package mockserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
)

// fastOptions make retries quick: a 2ms schedule, and Retry-After (1 s or
// more on a 409) capped to 20ms.
func fastOptions(extra ...saferetry.Option) []saferetry.Option {
	return append([]saferetry.Option{
		saferetry.WithMaxAttempts(8),
		saferetry.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(2 * time.Millisecond) }),
		saferetry.WithMaxRetryAfter(20 * time.Millisecond),
	}, extra...)
}

// pay makes one payment through rt with key and returns its status and the
// payment.
func pay(ctx context.Context, rt http.RoundTripper, baseURL, key, body string) (int, mockserver.Payment, error) {
	req, err := http.NewRequestWithContext(saferetry.WithKey(ctx, key), "POST", baseURL+"/payments", strings.NewReader(body))
	if err != nil {
		return 0, mockserver.Payment{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, mockserver.Payment{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, mockserver.Payment{}, err
	}
	var p mockserver.Payment
	if resp.StatusCode == http.StatusCreated {
		err = json.Unmarshal(b, &p)
	}
	return resp.StatusCode, p, err
}

// assertExactlyOnce checks, from the server's own records, that key executed
// once and produced payment id.
func assertExactlyOnce(t *testing.T, srv *mockserver.Server, key, id string) {
	t.Helper()
	if got := srv.Executions(key); got != 1 {
		t.Errorf("key %s executed %d times, want 1 (history %+v)", key, got, srv.Stats(key).History)
	}
	n := 0
	for _, p := range srv.Payments() {
		if p.IdempotencyKey == key {
			n++
			if p.ID != id {
				t.Errorf("client got payment %s, server holds %s", id, p.ID)
			}
		}
	}
	if n != 1 {
		t.Errorf("key %s has %d payments, want 1", key, n)
	}
}

func TestTransportUnderEachFault(t *testing.T) {
	tests := []struct {
		name         string
		inject       func(*mockserver.Server)
		opts         []saferetry.Option
		wantAttempts int // 0: at least 2
	}{
		{name: "no fault", inject: func(*mockserver.Server) {}, wantAttempts: 1},
		{name: "503 twice", inject: func(s *mockserver.Server) { s.FailNext(2, 503) }, wantAttempts: 3},
		{name: "500, 429, 408, 502", inject: func(s *mockserver.Server) {
			s.FailNext(1, 500)
			s.FailNext(1, 429)
			s.FailNext(1, 408)
			s.FailNext(1, 502)
		}, wantAttempts: 5},
		{name: "dropped after commit", inject: func(s *mockserver.Server) { s.DropAfterCommitNext(1) }, wantAttempts: 2},
		{name: "dropped twice after 503", inject: func(s *mockserver.Server) {
			s.FailNext(1, 503)
			s.DropAfterCommitNext(2) // the second drop is never used: only one execution
		}, wantAttempts: 3},
		{name: "slow execution beyond the attempt timeout", inject: func(s *mockserver.Server) {
			s.DelayNext(1, 150*time.Millisecond)
		}, opts: []saferetry.Option{saferetry.WithAttemptTimeout(50 * time.Millisecond)}},
		{name: "latency", inject: func(s *mockserver.Server) {
			s.SetLatency(5 * time.Millisecond)
			s.FailNext(1, 503)
		}, wantAttempts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mockserver.New()
			defer srv.Close()
			tt.inject(srv)
			var attempts atomic.Int32
			rt := saferetry.NewTransport(srv.Client().Transport, fastOptions(append(tt.opts,
				saferetry.WithHook(func(saferetry.Attempt) { attempts.Add(1) }))...)...)

			status, p, err := pay(context.Background(), rt, srv.URL, "e2e-key", payBody)
			if err != nil || status != http.StatusCreated {
				t.Fatalf("payment: status %d, err %v", status, err)
			}
			assertExactlyOnce(t, srv, "e2e-key", p.ID)
			if got := srv.Balance("EUR"); got != mockserver.DefaultBalance-1250 {
				t.Errorf("balance %d, want %d", got, mockserver.DefaultBalance-1250)
			}
			got := srv.Attempts("e2e-key")
			switch {
			case tt.wantAttempts == 0 && got < 2:
				t.Errorf("server saw %d attempts, want at least 2", got)
			case tt.wantAttempts > 0 && got != tt.wantAttempts:
				t.Errorf("server saw %d attempts, want %d (history %+v)", got, tt.wantAttempts, srv.Stats("e2e-key").History)
			}
			if int(attempts.Load()) > got {
				t.Errorf("client made %d attempts, server saw only %d", attempts.Load(), got)
			}
		})
	}
}

func TestTransportConcurrentDuplicateMeets409(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	// The duplicate must meet the execution in progress, also on a loaded
	// machine: the delay leaves it a second to get there.
	srv.DelayNext(1, time.Second)
	rt := saferetry.NewTransport(srv.Client().Transport, fastOptions(saferetry.WithMaxAttempts(500))...)

	type result struct {
		status int
		id     string
		err    error
	}
	results := make(chan result, 2)
	send := func() {
		status, p, err := pay(context.Background(), rt, srv.URL, "dup-key", payBody)
		results <- result{status, p.ID, err}
	}
	go send()
	// The duplicate leaves once the first execution holds the key.
	testenv.Eventually(t, "the delayed execution starts", func() bool { return len(srv.Faults().Delays) == 0 })
	go send()
	a, b := <-results, <-results
	if a.err != nil || b.err != nil || a.status != 201 || b.status != 201 {
		t.Fatalf("results %+v %+v", a, b)
	}
	if a.id != b.id {
		t.Errorf("the duplicates got payments %s and %s", a.id, b.id)
	}
	assertExactlyOnce(t, srv, "dup-key", a.id)
	in409 := 0
	for _, at := range srv.Stats("dup-key").History {
		if at.Outcome == mockserver.OutcomeInProgress {
			in409++
		}
	}
	if in409 == 0 {
		t.Errorf("no duplicate met 409: %+v", srv.Stats("dup-key").History)
	}
}

func TestTransportManyPaymentsUnderMixedFaults(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	srv.FailNext(6, 503)
	srv.DropAfterCommitNext(6)
	srv.DelayNext(6, 20*time.Millisecond)
	rt := saferetry.NewTransport(srv.Client().Transport, fastOptions(saferetry.WithMaxAttempts(30))...)

	const n = 24
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("mixed-%02d", i)
			// Every payment is sent twice at once, as a double click would.
			var inner sync.WaitGroup
			got := make([]string, 2)
			for j := range 2 {
				inner.Add(1)
				go func() {
					defer inner.Done()
					status, p, err := pay(context.Background(), rt, srv.URL, key, fmt.Sprintf(`{"amount":%d,"currency":"USD","recipient":"r%d"}`, i+1, i))
					if err != nil || status != 201 {
						t.Errorf("%s: status %d, err %v", key, status, err)
					}
					got[j] = p.ID
				}()
			}
			inner.Wait()
			if got[0] != got[1] {
				t.Errorf("%s: duplicates got %s and %s", key, got[0], got[1])
			}
			ids[i] = got[0]
		}()
	}
	wg.Wait()
	want := mockserver.DefaultBalance
	for i := range n {
		assertExactlyOnce(t, srv, fmt.Sprintf("mixed-%02d", i), ids[i])
		want -= int64(i + 1)
	}
	if got := srv.Balance("USD"); got != want {
		t.Errorf("USD balance %d, want %d", got, want)
	}
	if f := srv.Faults(); len(f.Fail) != 0 || f.DropAfterCommit != 0 || len(f.Delays) != 0 {
		t.Errorf("faults left unused: %+v", f)
	}
}

func TestTransportAfterExpireKeysExecutesAgain(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	rt := saferetry.NewTransport(srv.Client().Transport, fastOptions()...)
	_, p1, err := pay(context.Background(), rt, srv.URL, "ttl-key", payBody)
	if err != nil {
		t.Fatal(err)
	}
	srv.ExpireKeys()
	_, p2, err := pay(context.Background(), rt, srv.URL, "ttl-key", payBody)
	if err != nil {
		t.Fatal(err)
	}
	// Past the TTL a key is new again: the contract's checklist item 5.
	if p1.ID == p2.ID || srv.Executions("ttl-key") != 2 || len(srv.Payments()) != 2 {
		t.Errorf("after expiry: ids %s %s, %d executions", p1.ID, p2.ID, srv.Executions("ttl-key"))
	}
}

// balancer sends each attempt to the next of several servers, like a load
// balancer in front of instances of one service.
type balancer struct {
	base    http.RoundTripper
	targets []string // host:port
	next    atomic.Uint32
}

func (b *balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	i := int(b.next.Add(1)) % len(b.targets)
	r := req.Clone(req.Context())
	r.URL.Host = b.targets[i]
	r.Host = ""
	return b.base.RoundTrip(r)
}

func redisClient(t testing.TB) *redis.Client {
	t.Helper()
	u := testenv.RedisURL(t)
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("%s: %v", testenv.EnvRedisURL, err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		testenv.Unavailable(t, fmt.Sprintf("redis at %s unreachable (%v); start it to run", u, err))
	}
	return rdb
}

func TestTwoServersSharingRedis(t *testing.T) {
	rdb := redisClient(t)
	prefix := testenv.RedisPrefix(t, rdb, "saferetry-mockserver-test:")
	st := redisstore.New(rdb, redisstore.WithPrefix(prefix))
	a := mockserver.New(mockserver.WithStore(st))
	defer a.Close()
	b := mockserver.New(mockserver.WithStore(st))
	defer b.Close()

	// One instance commits and drops its answer, the retry lands on the
	// other one, which replays; failures and slow executions on both.
	a.DropAfterCommitNext(4)
	b.DropAfterCommitNext(4)
	a.FailNext(3, 503)
	b.DelayNext(4, 30*time.Millisecond)
	a.DelayNext(4, 30*time.Millisecond)

	lb := &balancer{base: a.Client().Transport, targets: []string{strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://")}}
	rt := saferetry.NewTransport(lb, fastOptions(saferetry.WithMaxAttempts(50))...)

	const n = 16
	var wg sync.WaitGroup
	ids := make([][3]string, n)
	for i := range n {
		for j := range 3 { // three concurrent sends of each payment
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, p, err := pay(context.Background(), rt, a.URL, fmt.Sprintf("shared-%02d", i), payBody)
				if err != nil || status != 201 {
					t.Errorf("payment %d: status %d, err %v", i, status, err)
				}
				ids[i][j] = p.ID
			}()
		}
	}
	wg.Wait()
	for i := range n {
		key := fmt.Sprintf("shared-%02d", i)
		if got := a.Executions(key) + b.Executions(key); got != 1 {
			t.Errorf("%s executed %d times across both servers (a %+v, b %+v)", key, got, a.Stats(key), b.Stats(key))
		}
		if ids[i][0] != ids[i][1] || ids[i][1] != ids[i][2] {
			t.Errorf("%s: the sends got different payments %v", key, ids[i])
		}
	}
	if got := len(a.Payments()) + len(b.Payments()); got != n {
		t.Errorf("%d payments across both servers, want %d", got, n)
	}
	spent := 2*mockserver.DefaultBalance - a.Balance("EUR") - b.Balance("EUR")
	if spent != n*1250 {
		t.Errorf("spent %d across both servers, want %d", spent, n*1250)
	}
	if a.Attempts("shared-00")+b.Attempts("shared-00") < 3 {
		t.Errorf("attempts for shared-00: a %d, b %d", a.Attempts("shared-00"), b.Attempts("shared-00"))
	}
	// The faults really happened. a gets every other attempt (48 at least),
	// so its 3 failures are used; the 16 executions are split between the
	// servers, so one of them executed 8 or more and used its 4 drops.
	outcomes := map[mockserver.Outcome]int{}
	for _, srv := range []*mockserver.Server{a, b} {
		for _, st := range srv.Keys() {
			for _, at := range st.History {
				outcomes[at.Outcome]++
			}
		}
	}
	if outcomes[mockserver.OutcomeInjectedFailure] != 3 || len(a.Faults().Fail) != 0 {
		t.Errorf("injected failures answered: %d, pending on a: %v; want 3 and none", outcomes[mockserver.OutcomeInjectedFailure], a.Faults().Fail)
	}
	if outcomes[mockserver.OutcomeDropped] < 4 {
		t.Errorf("%d answers dropped after commit, want at least 4 (outcomes %v)", outcomes[mockserver.OutcomeDropped], outcomes)
	}
	t.Logf("outcomes across both servers: %v", outcomes)
}

package mockserver_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/openapitest"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
)

// refusedRetries are the ways a retry of a payment first sent with the
// Content-Type lines first (none when nil) may be refused with 415, by its
// Content-Type or its Content-Encoding, and whether its fingerprint is the
// first request's: the fingerprint takes the first Content-Type line, an
// empty one as none (and then the body as bytes, not as JSON), and no
// Content-Encoding (the body's bytes are the same).
var refusedRetries = []struct {
	name   string
	first  []string
	h      http.Header
	sameFP bool
}{
	{"empty Content-Type after none", nil, http.Header{"Content-Type": {""}}, true},
	{"empty Content-Type after JSON", []string{"application/json"}, http.Header{"Content-Type": {""}}, false},
	{"two Content-Types", []string{"application/json"}, http.Header{"Content-Type": {"application/json", "text/plain"}}, true},
	{"gzip", []string{"application/json"}, http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}, true},
	{"text/plain", []string{"application/json"}, http.Header{"Content-Type": {"text/plain"}}, false},
	{"a form", []string{"application/json"}, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, false},
}

// TestPaymentMediaTypeRetryOfPaidKey: a retry of a payment that executed,
// with the same key but a Content-Type or Content-Encoding that the server
// refuses, is answered from the key's record, as the contract answers a
// retry: the stored 201, replayed, when the fingerprint is the first
// request's; 422 when it is not. It was answered 415, and a client that
// takes 415 as final believed that a payment made was not. Nothing runs
// again, and a key never used is still answered 415 and stores nothing.
// It holds over every store (each has the read-only Store.Get that the
// lookup takes), and in transactional mode, whose completed entries are
// committed.
func TestPaymentMediaTypeRetryOfPaidKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(t *testing.T) []mockserver.Option
	}{
		{"memstore", func(*testing.T) []mockserver.Option { return nil }},
		{"redisstore", func(t *testing.T) []mockserver.Option {
			rdb := redisClient(t)
			return []mockserver.Option{mockserver.WithStore(redisstore.New(rdb, redisstore.WithPrefix(testenv.RedisPrefix(t, rdb, "saferetry-mockserver-test:"))))}
		}},
		{"pgstore", func(t *testing.T) []mockserver.Option {
			pool := testenv.PostgresPool(t)
			st := pgstore.New(pool, pgstore.WithTable(testenv.PostgresTable(t, pool, "mock_mediatype_")))
			t.Cleanup(func() { _ = st.Close() })
			if err := st.CreateSchema(context.Background()); err != nil {
				t.Fatal(err)
			}
			return []mockserver.Option{mockserver.WithStore(st)}
		}},
		{"pgstore transactional", func(t *testing.T) []mockserver.Option {
			st, led := txStoreLedger(t, "mock_mediatype_", pgstore.DefaultLockTimeout)
			return []mockserver.Option{mockserver.WithStore(st), mockserver.WithLedger(led)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mockserver.New(tc.opts(t)...)
			defer srv.Close()
			if tc.name == "pgstore transactional" && !srv.Transactional() {
				t.Fatal("not in transactional mode")
			}
			paidKeyRetries(t, srv)
		})
	}
}

// paidKeyRetries checks TestPaymentMediaTypeRetryOfPaidKey on srv.
func paidKeyRetries(t *testing.T, srv *mockserver.Server) {
	for _, tc := range refusedRetries {
		key := "paid-" + tc.name
		_, first, firstBody := sendTyped(t, srv, key, tc.first, payBody)
		if first.StatusCode != http.StatusCreated {
			t.Fatalf("%s: first attempt %d %s", tc.name, first.StatusCode, firstBody)
		}
		h := tc.h.Clone()
		h.Set("Idempotency-Key", key)
		resp, b := sendHeaders(t, srv, h, payBody)
		switch {
		case tc.sameFP:
			if resp.StatusCode != http.StatusCreated || resp.Header.Get(idempotency.HeaderReplayed) != "true" || string(b) != string(firstBody) {
				t.Errorf("%s, key paid: %d (%s %q) %s; want the first 201 replayed: %s",
					tc.name, resp.StatusCode, idempotency.HeaderReplayed, resp.Header.Get(idempotency.HeaderReplayed), b, firstBody)
			}
		default:
			if resp.StatusCode != http.StatusUnprocessableEntity {
				t.Errorf("%s, key paid: %d %s, want 422", tc.name, resp.StatusCode, b)
			} else {
				wantProblem(t, resp, b, http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
			}
		}
		if n := srv.Executions(key); n != 1 {
			t.Errorf("%s: %d executions, want 1", tc.name, n)
		}

		fresh := "fresh-" + tc.name
		h.Set("Idempotency-Key", fresh)
		if resp, b := sendHeaders(t, srv, h, payBody); resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("%s, key never used: %d %s, want 415", tc.name, resp.StatusCode, b)
		}
		if _, resp, b := sendTyped(t, srv, fresh, []string{"application/json"}, payBody); resp.StatusCode != http.StatusCreated || resp.Header.Get(idempotency.HeaderReplayed) != "" {
			t.Errorf("%s, key refused with 415, then sent as application/json: %d (%s %q) %s; want a first 201",
				tc.name, resp.StatusCode, idempotency.HeaderReplayed, resp.Header.Get(idempotency.HeaderReplayed), b)
		}
	}
	if n := len(srv.Payments()); n != 2*len(refusedRetries) {
		t.Errorf("%d payments, want %d", n, 2*len(refusedRetries))
	}
}

// TestPaymentMediaTypeRetryInProgress: a retry with a refused media type
// of a payment still running is answered by the idempotency Middleware,
// as any retry: 409 in progress, with Retry-After, with the first
// request's fingerprint, 422 with another; not 415. After the payment,
// its retry is answered likewise: the 201 replayed with the same
// fingerprint, 422 with another. The payment executes once.
func TestPaymentMediaTypeRetryInProgress(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := mockserver.New(mockserver.WithHandlerMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(entered); <-release })
			next.ServeHTTP(w, r)
		})
	}))
	defer srv.Close()
	done := make(chan int)
	go func() {
		resp, _, err := send(t, srv, http.MethodPost, "/payments", "running", payBody)
		if err != nil {
			t.Error(err)
			done <- 0
			return
		}
		done <- resp.StatusCode
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the first attempt never reached the handler")
	}
	for _, tc := range refusedRetries {
		if tc.first == nil {
			continue // sameFP is about a first request without Content-Type; this one is application/json
		}
		h := tc.h.Clone()
		h.Set("Idempotency-Key", "running")
		resp, b := sendHeaders(t, srv, h, payBody)
		if !tc.sameFP {
			wantProblem(t, resp, b, http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
			continue
		}
		if resp.StatusCode != http.StatusConflict || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s, key in progress: %d (Retry-After %q) %s, want 409 with Retry-After", tc.name, resp.StatusCode, resp.Header.Get("Retry-After"), b)
			continue
		}
		if p := wantProblem(t, resp, b, http.StatusConflict, idempotency.ProblemInProgress); p.Key != "running" {
			t.Errorf("%s, key in progress: idempotency_key %q, want running", tc.name, p.Key)
		}
	}
	close(release)
	if status := <-done; status != http.StatusCreated {
		t.Errorf("first attempt: %d, want 201", status)
	}
	for _, tc := range refusedRetries {
		if tc.first == nil {
			continue
		}
		h := tc.h.Clone()
		h.Set("Idempotency-Key", "running")
		resp, b := sendHeaders(t, srv, h, payBody)
		switch {
		case !tc.sameFP:
			if resp.StatusCode != http.StatusUnprocessableEntity {
				t.Errorf("%s, key paid: %d %s, want 422", tc.name, resp.StatusCode, b)
			}
		case resp.StatusCode != http.StatusCreated || resp.Header.Get(idempotency.HeaderReplayed) != "true":
			t.Errorf("%s, key paid: %d %s, want the 201 replayed", tc.name, resp.StatusCode, b)
		}
	}
	if n := srv.Executions("running"); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
}

const problemKeyChanged = "https://pkg.go.dev/github.com/saferetry/saferetry/mockserver#ProblemKeyChanged"

// getHookStore is a Store that calls hook after each Get, which returns
// what the store held before hook ran.
type getHookStore struct {
	idempotency.Store
	hook func()
}

func (s getHookStore) Get(ctx context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	e, found, err := s.Store.Get(ctx, k)
	s.hook()
	return e, found, err
}

// TestPaymentMediaTypeRetryKeyGoneMeanwhile: a retry with a refused
// media type whose key's record was found but is gone when the idempotency
// Middleware claims the key (it expired in between: ExpireKeys, the
// TTL) is not run as a payment: it is answered 503 with Retry-After, which
// stores nothing, and its retry is answered 415; the key sent as
// application/json then executes for the first time.
func TestPaymentMediaTypeRetryKeyGoneMeanwhile(t *testing.T) {
	var srv *mockserver.Server
	var expire atomic.Bool
	st := memstore.New()
	defer st.Close()
	srv = mockserver.New(mockserver.WithStore(getHookStore{Store: st, hook: func() {
		if expire.CompareAndSwap(true, false) {
			srv.ExpireKeys()
		}
	}}))
	defer srv.Close()
	doc := openapitest.Load(t, srv.OpenAPI())
	documented := func(h http.Header, resp *http.Response) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(payBody))
		req.Header = h
		for _, msg := range doc.Response(req, resp) {
			t.Errorf("the %d is not as documented: %s", resp.StatusCode, msg)
		}
	}
	if _, resp, b := sendTyped(t, srv, "gone", []string{"application/json"}, payBody); resp.StatusCode != http.StatusCreated {
		t.Fatalf("first attempt: %d %s", resp.StatusCode, b)
	}
	expire.Store(true)
	h := http.Header{"Idempotency-Key": {"gone"}, "Content-Type": {""}}
	resp, b := sendHeaders(t, srv, h, payBody)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("key expired between its lookup and its claim: %d (Retry-After %q) %s; want 503 with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), b)
	} else {
		wantProblem(t, resp, b, http.StatusServiceUnavailable, problemKeyChanged)
		documented(h, resp)
	}
	if resp, b := sendHeaders(t, srv, h, payBody); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("its retry: %d %s, want 415", resp.StatusCode, b)
	} else {
		documented(h, resp)
	}
	if _, resp, b := sendTyped(t, srv, "gone", []string{"application/json"}, payBody); resp.StatusCode != http.StatusCreated || resp.Header.Get(idempotency.HeaderReplayed) != "" {
		t.Errorf("then as application/json: %d (%s %q) %s; want a first 201",
			resp.StatusCode, idempotency.HeaderReplayed, resp.Header.Get(idempotency.HeaderReplayed), b)
	}
	if n := len(srv.Payments()); n != 2 {
		t.Errorf("%d payments, want 2 (one per key epoch)", n)
	}
}

// downStore is a Store that cannot be reached.
type downStore struct{ idempotency.Store }

var errDown = errors.New("store down")

func (downStore) Get(context.Context, idempotency.Key) (idempotency.Entry, bool, error) {
	return idempotency.Entry{}, false, errDown
}

func (downStore) Claim(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
	return idempotency.ClaimResult{}, errDown
}

// TestPaymentMediaTypeStoreDown: a payment with a refused media type whose
// key cannot be looked up, the store being down, is answered as the
// Middleware answers a store that is down: 503 ProblemStoreUnavailable
// (fail closed), or, with WithFailOpen, the handler's own answer, 415,
// since it runs unprotected and nothing is stored; not a 503 saying that
// the key's record went away.
func TestPaymentMediaTypeStoreDown(t *testing.T) {
	for _, open := range []bool{false, true} {
		st := memstore.New()
		srv := mockserver.New(mockserver.WithStore(downStore{st}),
			mockserver.WithIdempotencyOptions(idempotency.WithFailOpen(open), idempotency.WithLogger(slog.New(slog.DiscardHandler))))
		resp, b := sendHeaders(t, srv, http.Header{"Idempotency-Key": {"down"}, "Content-Type": {"text/plain"}}, payBody)
		switch {
		case !open:
			wantProblem(t, resp, b, http.StatusServiceUnavailable, idempotency.ProblemStoreUnavailable)
		case resp.StatusCode != http.StatusUnsupportedMediaType:
			t.Errorf("fail open: %d %s, want 415", resp.StatusCode, b)
		}
		if n := len(srv.Payments()); n != 0 {
			t.Errorf("fail open %v: %d payments, want none", open, n)
		}
		srv.Close()
		st.Close()
	}
}

package conformance_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/contract"
)

// foldKeyCase plants a key store that compares keys in any case, as a
// UNIQUE column under a case-insensitive collation (MySQL's default) does:
// the key reaches the Middleware in lower case. Two operations whose keys
// differ only in case then run once, the second answered with the first's
// replay. unmarked drops the replay marker too.
func foldKeyCase(unmarked bool) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if vs := r.Header.Values(contract.HeaderKey); len(vs) == 1 {
				r.Header.Set(contract.HeaderKey, strings.ToLower(vs[0]))
			}
			if unmarked {
				w = dropReplayed{w}
			}
			h.ServeHTTP(w, r)
		})
	}
}

// dropReplayed removes Idempotent-Replayed from the answer it writes.
type dropReplayed struct{ http.ResponseWriter }

func (d dropReplayed) WriteHeader(code int) {
	d.Header().Del(contract.HeaderReplayed)
	d.ResponseWriter.WriteHeader(code)
}

func (d dropReplayed) Write(b []byte) (int, error) {
	d.Header().Del(contract.HeaderReplayed)
	return d.ResponseWriter.Write(b)
}

// TestKeyCaseFolded: a key is compared byte for byte (CONTRACT.md: the
// key names one logical operation). A server that folds its case runs
// the operation of the burst, whose key differs from the first request's
// only in case, not at all: it replays the first request's answer.
// concurrent-once fails when the server marks its replays (no success of
// the burst is an execution) and warns when it does not (the answers
// could also be new executions that name the same resource); the
// Middleware alone passes.
func TestKeyCaseFolded(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(http.Handler) http.Handler
		want conformance.Status
	}{
		{"the Middleware", func(h http.Handler) http.Handler { return h }, conformance.Pass},
		{"keys folded, replays marked", foldKeyCase(false), conformance.Fail},
		{"keys folded, replays unmarked", foldKeyCase(true), conformance.Warn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := plantedServer(t, tc.wrap)
			c := &conformance.Checker{Concurrency: 4, Timeout: 5 * time.Second}
			rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/items", Body: []byte(body)})
			res, _ := rep.Result(conformance.CheckConcurrentOnce)
			if res.Status != tc.want || (tc.want != conformance.Pass && !strings.Contains(res.Verdict, "case")) {
				logText(t, rep)
				t.Fatalf("concurrent-once %s (%s), want %s naming the keys' case", res.Status, res.Verdict, tc.want)
			}
		})
	}
}

// renewServer keeps the contract (the Middleware) but does not mark its
// replays, and every run answers the same bytes naming one resource, as a
// renewal answers its subscription: a run and a replay look alike. It
// counts its runs at GET /runs. wrap goes around the Middleware; held
// makes a run of the burst (its key in upper case) wait until a request
// has met it in progress (409), so that the burst shows one.
func renewServer(t *testing.T, wrap func(http.Handler) http.Handler, held bool) *httptest.Server {
	t.Helper()
	var runs atomic.Int64
	conflict := make(chan struct{})
	var once sync.Once
	app := idempotency.Middleware(memstore.New())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k := r.Header.Get(contract.HeaderKey); held && k == strings.ToUpper(k) {
			select {
			case <-conflict:
			case <-time.After(5 * time.Second):
			}
		}
		runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"sub_1","status":"active"}`))
	}))
	mux := http.NewServeMux()
	mux.Handle("POST /subscriptions/sub_1/renew", wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		app.ServeHTTP(seeConflict{dropReplayed{w}, func() { once.Do(func() { close(conflict) }) }}, r)
	})))
	mux.HandleFunc("GET /runs", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strconv.FormatInt(runs.Load(), 10)))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// seeConflict calls saw when a 409 is written.
type seeConflict struct {
	http.ResponseWriter
	saw func()
}

func (s seeConflict) WriteHeader(code int) {
	if code == http.StatusConflict {
		s.saw()
	}
	s.ResponseWriter.WriteHeader(code)
}

// TestKeyCaseSameAnswerRan: against a server that does not mark its
// replays and answers every run with the same bytes, the burst's answers
// are all the first request's whether its key ran or was folded into the
// first's. A 409 in the burst shows that its key was in progress, which a
// key folded into the first request's, long completed, never is; a count
// that grew by one operation during the burst shows that it ran. Either
// passes concurrent-once; a server that folds keys' case still gets the
// WARN, as does one that shows neither.
func TestKeyCaseSameAnswerRan(t *testing.T) {
	same := func(h http.Handler) http.Handler { return h }
	for _, tc := range []struct {
		name  string
		wrap  func(http.Handler) http.Handler
		held  bool
		count bool
		want  conformance.Status
	}{
		{"neither a 409 nor a count", same, false, false, conformance.Warn},
		{"a 409 in the burst", same, true, false, conformance.Pass},
		{"a count", same, false, true, conformance.Pass},
		{"keys folded, a count", foldKeyCase(false), false, true, conformance.Warn},
		{"keys folded, held", foldKeyCase(false), true, false, conformance.Warn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := renewServer(t, tc.wrap, tc.held)
			c := &conformance.Checker{Concurrency: 4, Timeout: 10 * time.Second}
			if tc.count {
				c.CountURL = srv.URL + "/runs"
			}
			rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/subscriptions/sub_1/renew", Body: []byte(body)})
			res, _ := rep.Result(conformance.CheckConcurrentOnce)
			if res.Status != tc.want {
				logText(t, rep)
				t.Fatalf("concurrent-once %s (%s), want %s", res.Status, res.Verdict, tc.want)
			}
		})
	}
}

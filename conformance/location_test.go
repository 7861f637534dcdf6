package conformance_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

// jobServer keeps the contract (the Middleware, replays unmarked), its
// keys scoped to their endpoint (WithScope by path), and answers every
// run of POST /jobs and below alike but for its Location: 202
// {"status":"queued"}, Location /jobs/<n>, as an API that queues work
// does. The same key at a path below /jobs is a key of its own there, and
// runs.
func jobServer(t *testing.T) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	mw := idempotency.Middleware(memstore.New(), idempotency.WithScope(func(r *http.Request) (string, error) { return r.URL.Path, nil }))
	app := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/jobs/"+strconv.FormatInt(n.Add(1), 10))
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"status":"queued"}`))
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		app.ServeHTTP(dropReplayed{w}, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestAnotherLocationIsAnotherAnswer: an answer whose bytes are the first
// request's but whose Location names another resource is another run,
// not the first request's answer (a Location tells resources apart,
// however alike the bodies). The same key at another path ran there (a
// key of its own), which reuse-refused must not read as the first
// answer replayed; the burst's key ran, which concurrent-once must not
// read as a key folded into the first request's.
func TestAnotherLocationIsAnotherAnswer(t *testing.T) {
	srv := jobServer(t)
	c := &conformance.Checker{Concurrency: 4, Timeout: 5 * time.Second}
	rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/jobs", Body: []byte(body)})
	for _, id := range []string{conformance.CheckReuseRefused, conformance.CheckConcurrentOnce} {
		if res, _ := rep.Result(id); res.Status != conformance.Pass {
			logText(t, rep)
			t.Errorf("%s %s (%s), want PASS", id, res.Status, res.Verdict)
		}
	}
}

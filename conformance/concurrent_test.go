package conformance_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/contract"
)

// acceptedServer answers an operation 202 {"status":"accepted"}, as an
// asynchronous API does: no Location, no id. With race, its layer looks
// the key up and records it 100 ms later, so a burst runs the operation
// several times; without, it holds a lock over the whole operation and
// runs it once. marks says whether its replays are marked
// Idempotent-Replayed: true; markAll marks every answer so, its first
// executions' too, as a layer that marks whatever carries a key does.
func acceptedServer(t *testing.T, race, marks, markAll bool) *httptest.Server {
	t.Helper()
	var op, mu sync.Mutex       // op: the whole operation, without race
	seen := map[string]string{} // key -> body
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := readAll(r)
		key, err := contract.ParseKeyFields(r.Header.Values(contract.HeaderKey))
		if err != nil {
			contract.WriteProblem(w, http.StatusBadRequest, map[string]any{"type": "about:blank", "title": "bad key", "status": 400}, 0)
			return
		}
		if !race {
			op.Lock()
			defer op.Unlock()
		}
		mu.Lock()
		prev, ok := seen[key]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if markAll {
			w.Header().Set(contract.HeaderReplayed, "true")
		}
		if ok {
			if prev != string(b) {
				contract.WriteProblem(w, http.StatusUnprocessableEntity, map[string]any{"type": "about:blank", "title": "key reused", "status": 422}, 0)
				return
			}
			if marks {
				w.Header().Set(contract.HeaderReplayed, "true")
			}
		} else {
			time.Sleep(100 * time.Millisecond) // looked up, not yet recorded
			mu.Lock()
			seen[key] = string(b)
			mu.Unlock()
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"status":"accepted"}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestConcurrentOnceWithoutIdentity: equal bodies that name no resource do
// not show one execution. concurrent-once warns when more than one success
// of the burst is unmarked (several executions, or one answer shared with
// waiting requests: only a count tells), as when replays are unmarked, and
// passes when every success but one is marked. A server that marks its
// first executions too marks nothing: its marked successes may be several
// executions, so it gets the warning of a server without marks.
func TestConcurrentOnceWithoutIdentity(t *testing.T) {
	accepted := func(t *testing.T) *httptest.Server {
		mw := idempotency.Middleware(memstore.New())
		srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(50 * time.Millisecond)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"status":"accepted"}`))
		})))
		t.Cleanup(srv.Close)
		return srv
	}
	for _, tc := range []struct {
		name   string
		server func(t *testing.T) *httptest.Server
		want   conformance.Status
	}{
		{"replays marked, check then insert", func(t *testing.T) *httptest.Server { return acceptedServer(t, true, true, false) }, conformance.Warn},
		{"replays unmarked, runs once", func(t *testing.T) *httptest.Server { return acceptedServer(t, false, false, false) }, conformance.Warn},
		{"every answer marked, check then insert", func(t *testing.T) *httptest.Server { return acceptedServer(t, true, true, true) }, conformance.Warn},
		{"replays marked, runs once (Middleware)", accepted, conformance.Pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tc.server(t)
			c := &conformance.Checker{Concurrency: 4, Timeout: 5 * time.Second}
			rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/jobs", Body: []byte(body)})
			if res, _ := rep.Result(conformance.CheckConcurrentOnce); res.Status != tc.want {
				logText(t, rep)
				t.Fatalf("concurrent-once %s (%s), want %s", res.Status, res.Verdict, tc.want)
			}
		})
	}
}

// TestReplayMarkerOnFirstAnswer: a server that marks a fresh key's first
// answer Idempotent-Replayed: true marks every answer, so its marker does
// not tell a replay: replay-marker fails, naming the first answer.
func TestReplayMarkerOnFirstAnswer(t *testing.T) {
	srv := acceptedServer(t, false, true, true)
	c := &conformance.Checker{Profile: conformance.ProfileStripe, Concurrency: 2, Timeout: 5 * time.Second}
	rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/jobs", Body: []byte(body)})
	res, _ := rep.Result(conformance.CheckReplayMarker)
	if res.Status != conformance.Fail || !strings.Contains(res.Verdict, "first") {
		logText(t, rep)
		t.Fatalf("replay-marker %s (%s), want FAIL naming the first answer", res.Status, res.Verdict)
	}
}

package conformance_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/contract"
)

// bodyOnlyServer keeps the status and body of an outcome but not its
// headers: its replays have no Location, and the framework's default
// Content-Type.
func bodyOnlyServer(t *testing.T) *httptest.Server {
	t.Helper()
	type rec struct{ body, answer string }
	var mu sync.Mutex
	keys := map[string]rec{}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := readAll(r)
		key, err := contract.ParseKeyFields(r.Header.Values(contract.HeaderKey))
		if err != nil {
			contract.WriteProblem(w, http.StatusBadRequest, map[string]any{"type": "about:blank", "title": "bad key", "status": 400}, 0)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if e, ok := keys[key]; ok {
			if e.body != string(b) {
				contract.WriteProblem(w, http.StatusUnprocessableEntity, map[string]any{"type": "about:blank", "title": "key reused", "status": 422}, 0)
				return
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set(contract.HeaderReplayed, "true")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(e.answer))
			return
		}
		n++
		id := strconv.Itoa(n)
		out := `{"id":"item_` + id + `"}`
		keys[key] = rec{body: string(b), answer: out}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/items/item_"+id)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(out))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReplayHeadersCompared: a replay must carry the first answer's
// allow-listed headers. One without its Location and with another
// Content-Type fails replay-headers, naming both, though its status and
// body pass replay; the Middleware's replays pass.
func TestReplayHeadersCompared(t *testing.T) {
	c := &conformance.Checker{Concurrency: 2, Timeout: 5 * time.Second}

	rep := runTarget(t, c, conformance.Target{URL: bodyOnlyServer(t).URL + "/items", Body: []byte(body)})
	res, _ := rep.Result(conformance.CheckReplayHeaders)
	if res.Status != conformance.Fail || res.Level != conformance.LevelMust || rep.Passed() ||
		!strings.Contains(res.Verdict, "Location") || !strings.Contains(res.Verdict, "Content-Type") {
		logText(t, rep)
		t.Fatalf("replay-headers %s %s (%s), want a MUST FAIL naming Location and Content-Type", res.Level, res.Status, res.Verdict)
	}
	if res, _ := rep.Result(conformance.CheckReplay); res.Status != conformance.Pass {
		t.Errorf("replay %s (%s): status and body are the same", res.Status, res.Verdict)
	}

	srv := itemServer(t, wrappedList) // the Middleware, with a Location
	rep = runTarget(t, c, conformance.Target{URL: srv.URL + "/items", Body: []byte(body), KeyRequired: true})
	if res, _ := rep.Result(conformance.CheckReplayHeaders); res.Status != conformance.Pass || !strings.Contains(res.Verdict, "Location") {
		logText(t, rep)
		t.Fatalf("replay-headers %s (%s) for the Middleware's replay", res.Status, res.Verdict)
	}
}

// TestReplayGoneExplained: behind a Middleware whose store keeps no answer
// over 16 bytes, every answer is recorded as completed but not
// replayable, and a replay gets 410. The checks that read a replay fail
// (replay) or may fail (replay-headers, concurrent-409, ttl-expiry), and
// each verdict that meets the 410 names it and says what it means, so that
// the user looks at the server's limit on stored answers.
func TestReplayGoneExplained(t *testing.T) {
	items := &naive{entries: map[string]*naiveEntry{}} // only its handler is used
	mw := idempotency.Middleware(memstore.New(), idempotency.WithMaxResponseBody(16), idempotency.WithTTL(time.Hour))
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		items.execute(w, &naiveEntry{}, readAll(r))
	})))
	defer srv.Close()
	// The checker is told a retention shorter than the server's: the
	// re-send of ttl-expiry meets the 410 too.
	c := &conformance.Checker{Concurrency: 4, Timeout: 5 * time.Second, TTL: 200 * time.Millisecond}
	rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/items", Body: []byte(body)})

	for _, id := range []string{conformance.CheckReplay, conformance.CheckReplayHeaders, conformance.CheckConcurrent409, conformance.CheckTTLExpiry} {
		res, _ := rep.Result(id)
		if id == conformance.CheckReplay && res.Status != conformance.Fail {
			t.Errorf("replay %s (%s), want FAIL", res.Status, res.Verdict)
		}
		if res.Status != conformance.Fail {
			continue
		}
		if !strings.Contains(res.Verdict, "410") || !strings.Contains(res.Verdict, "not replayable") || !strings.Contains(res.Verdict, "too large") {
			t.Errorf("%s: %q, want the verdict to name 410 and say it means an answer recorded as not replayable (too large for the store, say)", id, res.Verdict)
		}
	}
	if t.Failed() {
		logText(t, rep)
	}
}

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

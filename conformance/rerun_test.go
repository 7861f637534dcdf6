package conformance_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/internal/contract"
)

// rerunningServer is a broken server whose executions do not exclude each
// other: every request that meets its key in progress runs the operation
// again (a new resource, a new Location), unmarked; a stored replay is
// marked. Its answers' bodies carry no id and are the same bytes for every
// execution: only Location tells the resources apart.
func rerunningServer(t *testing.T, firstLink, replayLink string) *httptest.Server {
	t.Helper()
	type entry struct {
		body string
		done bool
		loc  string
	}
	var mu sync.Mutex
	keys := map[string]*entry{}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := string(readAll(r))
		key, err := contract.ParseKeyFields(r.Header.Values(contract.HeaderKey))
		if err != nil || key == "" {
			contract.WriteProblem(w, http.StatusBadRequest, map[string]any{"type": "about:blank", "title": "bad key", "status": 400}, 0)
			return
		}
		sk := r.Header.Get("Authorization") + "\x00" + key
		mu.Lock()
		e, ok := keys[sk]
		if ok && e.body != b {
			mu.Unlock()
			contract.WriteProblem(w, http.StatusUnprocessableEntity, map[string]any{"type": "about:blank", "title": "key reused", "status": 422}, 0)
			return
		}
		if ok && e.done {
			loc := e.loc
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Location", loc)
			if replayLink != "" {
				w.Header().Set("Link", replayLink)
			}
			w.Header().Set(contract.HeaderReplayed, "true")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"status":"created"}`))
			return
		}
		// BROKEN: a key in progress runs again.
		n++
		loc := "/items/item_" + strconv.Itoa(n)
		if !ok {
			e = &entry{body: b}
			keys[sk] = e
		}
		mu.Unlock()
		time.Sleep(work)
		mu.Lock()
		if !e.done {
			e.done, e.loc = true, loc
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", loc)
		if firstLink != "" {
			w.Header().Set("Link", firstLink)
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"status":"created"}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The burst ran the operation several times: successes with different
// Locations and the same body bytes name different resources, a FAIL.
func TestConcurrentOnceTellsLocationsApart(t *testing.T) {
	srv := rerunningServer(t, "", "")
	rep := runTarget(t, &conformance.Checker{Timeout: 10 * time.Second},
		conformance.Target{URL: srv.URL + "/items", Body: []byte(body), KeyRequired: true})
	wantStatus(t, rep, conformance.CheckReplayMarker, conformance.Pass)
	res, _ := rep.Result(conformance.CheckConcurrentOnce)
	t.Logf("concurrent-once: %s: %s", res.Status, res.Verdict)
	wantStatus(t, rep, conformance.CheckConcurrentOnce, conformance.Fail)
}

// A replay whose Link changed a quoted parameter's value ("x, y" became
// "x,y"): a comma in a quoted string is part of the value, so this is a
// different field value, a FAIL, not a spelling.
func TestReplayHeadersQuotedCommaIsPartOfTheValue(t *testing.T) {
	srv := rerunningServer(t, `</a>; rel="a"; title="x, y"`, `</a>; rel="a"; title="x,y"`)
	rep := runTarget(t, &conformance.Checker{Timeout: 10 * time.Second},
		conformance.Target{URL: srv.URL + "/items", Body: []byte(body), KeyRequired: true})
	res, _ := rep.Result(conformance.CheckReplayHeaders)
	t.Logf("replay-headers: %s: %s", res.Status, res.Verdict)
	wantStatus(t, rep, conformance.CheckReplayHeaders, conformance.Fail)
}

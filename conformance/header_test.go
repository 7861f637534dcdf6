package conformance_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/contract"
)

// TestHeaderNamesInAnyCase: the headers of Target.Header, AuthA and AuthB
// count whatever the case of their names. An Idempotency-Key in
// Target.Header written in lower case is ignored like a canonical one (a
// correct server saw two keys and refused every request), a lower-case
// Content-Type is the one sent, and a principal's Authorization replaces
// the target's, in any case.
func TestHeaderNamesInAnyCase(t *testing.T) {
	type seen struct{ keys, types, auth []string }
	var mu sync.Mutex
	var reqs []seen
	mw := idempotency.Middleware(memstore.New(), idempotency.WithKeyRequired(true))
	app := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"x1"}`))
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, seen{r.Header.Values(contract.HeaderKey), r.Header.Values("Content-Type"), r.Header.Values("Authorization")})
		mu.Unlock()
		app.ServeHTTP(w, r)
	}))
	defer srv.Close()

	c := &conformance.Checker{Concurrency: 2, Timeout: 5 * time.Second,
		AuthA: http.Header{"authorization": {"Bearer alice"}}, AuthB: principalB}
	rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/items", Body: []byte(body), Header: http.Header{
		"idempotency-key": {"the-callers-own-key"},
		"content-type":    {"application/json; charset=utf-8"},
		"authorization":   {"Bearer target"},
	}})
	if res, _ := rep.Result(conformance.CheckFirstRequest); res.Status != conformance.Pass {
		logText(t, rep)
		t.Errorf("first-request %s (%s) against a server that keeps the contract", res.Status, res.Verdict)
	}
	mu.Lock()
	defer mu.Unlock()
	auths := map[string]bool{}
	for i, r := range reqs {
		// malformed-key sends two keys of its own once, on purpose.
		if len(r.keys) > 1 && !strings.HasPrefix(r.keys[0], "saferetry-check-malformed-") || slices.Contains(r.keys, "the-callers-own-key") {
			t.Errorf("request %d: Idempotency-Key %q, want the checker's own only", i, r.keys)
		}
		if !slices.Equal(r.types, []string{"application/json; charset=utf-8"}) {
			t.Errorf("request %d: Content-Type %q, want the target's only", i, r.types)
		}
		if len(r.auth) != 1 {
			t.Errorf("request %d: Authorization %q, want one", i, r.auth)
		}
		auths[r.auth[0]] = true
	}
	for _, want := range []string{"Bearer target", "Bearer alice", "Bearer bob"} {
		if !auths[want] {
			t.Errorf("no request with Authorization %q: %v", want, auths)
		}
	}
}

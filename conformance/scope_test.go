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

// scopeServer keeps the keys of its principals (their Authorization) in one
// key space when shared, and in one each when not; its fingerprint covers
// the principal, so that a shared key sent by another principal is refused
// with refusal (0 means 422) instead of replayed. forbidden is a principal
// it answers 403.
func scopeServer(t *testing.T, shared bool, refusal int, forbidden string) *httptest.Server {
	t.Helper()
	type entry struct{ fingerprint, answer string }
	var mu sync.Mutex
	keys := map[string]entry{}
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := readAll(r)
		who := r.Header.Get("Authorization")
		if forbidden != "" && who == forbidden {
			contract.WriteProblem(w, http.StatusForbidden, map[string]any{"type": "about:blank", "title": "forbidden", "status": 403}, 0)
			return
		}
		key, err := contract.ParseKeyFields(r.Header.Values(contract.HeaderKey))
		if err != nil {
			contract.WriteProblem(w, http.StatusBadRequest, map[string]any{"type": "about:blank", "title": "bad key", "status": 400}, 0)
			return
		}
		if !shared {
			key = who + "\x00" + key
		}
		if refusal == 0 {
			refusal = http.StatusUnprocessableEntity
		}
		fp := who + "\x00" + string(b)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if e, ok := keys[key]; ok {
			if e.fingerprint != fp {
				contract.WriteProblem(w, refusal, map[string]any{"type": "about:blank", "title": "key reused", "status": refusal}, 0)
				return
			}
			w.Header().Set(contract.HeaderReplayed, "true")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(e.answer))
			return
		}
		n++
		out := `{"id":"item_` + strconv.Itoa(n) + `"}`
		keys[key] = entry{fingerprint: fp, answer: out}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(out))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestScopeIsolationRefusals: principal b's request with a's key is new in
// b's scope. A refusal of it that b's own key does not get shows one key
// space for both principals and fails scope-isolation, whatever its status:
// 422, 400 (Stripe's status for a reused key), or 403 (the key "belongs to
// another user"); a 403 that b gets whatever the key shows only that b
// could not run the operation, and warns; a run of its own passes.
func TestScopeIsolationRefusals(t *testing.T) {
	for _, tc := range []struct {
		name      string
		shared    bool
		refusal   int
		forbidden string
		profile   conformance.Profile
		want      conformance.Status
	}{
		{"one key space, 422", true, 0, "", "", conformance.Fail},
		{"one key space, 400, stripe", true, http.StatusBadRequest, "", conformance.ProfileStripe, conformance.Fail},
		{"one key space, 403", true, http.StatusForbidden, "", "", conformance.Fail},
		{"principal b forbidden", false, 0, principalB.Get("Authorization"), "", conformance.Warn},
		{"a key space each", false, 0, "", "", conformance.Pass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := scopeServer(t, tc.shared, tc.refusal, tc.forbidden)
			c := &conformance.Checker{Concurrency: 2, Timeout: 5 * time.Second, AuthA: principalA, AuthB: principalB, Profile: tc.profile}
			rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/items", Body: []byte(body)})
			if res, _ := rep.Result(conformance.CheckScopeIsolation); res.Status != tc.want {
				logText(t, rep)
				t.Fatalf("scope-isolation %s (%s), want %s", res.Status, res.Verdict, tc.want)
			}
		})
	}
}

package interop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/saferetry/saferetry/idempotency"
)

// payments is a POST handler that counts its executions. Once hold is
// set, the first execution after it signals entered and waits for hold to
// close.
type payments struct {
	executions atomic.Int64
	holdFirst
}

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := p.executions.Add(1)
	p.wait()
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/payments/%d", n))
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":%d,"request":%s}`, n, body)
}

// routePattern scopes keys by the chi route pattern that matched. chi knows
// it only once it routed the request: in middleware of a route group or of
// With, not in middleware given to the router's own Use.
func routePattern(seen *[]string, mu *sync.Mutex) func(*http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		p := chi.RouteContext(r.Context()).RoutePattern()
		mu.Lock()
		*seen = append(*seen, p)
		mu.Unlock()
		if p == "" {
			return "", errors.New("no chi route pattern yet")
		}
		return p, nil
	}
}

func TestChi(t *testing.T) {
	const pattern = "/accounts/{id}/payments"
	t.Run("Use", func(t *testing.T) {
		p := &payments{}
		r := chi.NewRouter()
		r.Use(idempotency.Middleware(newStore(t)))
		r.Method(http.MethodPost, pattern, p)
		checkChiContract(t, r, p)
	})
	t.Run("GroupScopedByRoutePattern", func(t *testing.T) {
		var mu sync.Mutex
		var scopes []string
		p := &payments{}
		store := newStore(t)
		r := chi.NewRouter()
		r.Group(func(r chi.Router) {
			r.Use(idempotency.Middleware(store, idempotency.WithScope(routePattern(&scopes, &mu))))
			r.Method(http.MethodPost, pattern, p)
		})
		checkChiContract(t, r, p)
		mu.Lock()
		defer mu.Unlock()
		for _, s := range scopes {
			if s != pattern {
				t.Fatalf("scopes seen %q, want %q every time", scopes, pattern)
			}
		}
		_, found, err := store.Get(context.Background(), idempotency.Key{Scope: pattern, Key: "pay-1"})
		if err != nil || !found {
			t.Errorf("store.Get in scope %q: found %v, %v; want the record there", pattern, found, err)
		}
	})
	t.Run("UseSeesNoRoutePattern", func(t *testing.T) {
		var mu sync.Mutex
		var scopes []string
		p := &payments{}
		r := chi.NewRouter()
		r.Use(idempotency.Middleware(newStore(t), idempotency.WithScope(routePattern(&scopes, &mu))))
		r.Method(http.MethodPost, pattern, p)
		got := post(r, "/accounts/7/payments", "pay-1", `{"amount":1}`)
		if got.Code != http.StatusInternalServerError || problemType(t, got) != idempotency.ProblemScopeUnavailable {
			t.Errorf("got %d %s, want 500 %s: the router's Use runs before routing", got.Code, got.Body, idempotency.ProblemScopeUnavailable)
		}
		if p.executions.Load() != 0 || len(scopes) != 1 || scopes[0] != "" {
			t.Errorf("executions %d, scopes %q; want 0 and one empty pattern", p.executions.Load(), scopes)
		}
	})
}

// checkChiContract runs the contract through r: one execution and a
// byte-true replay, 422 for the key with another body, 409 while running.
func checkChiContract(t *testing.T, r http.Handler, p *payments) {
	t.Helper()
	first := post(r, "/accounts/7/payments", "pay-1", `{"amount":1500}`)
	again := post(r, "/accounts/7/payments", "pay-1", `{"amount":1500}`)
	if first.Code != http.StatusCreated || first.Header().Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("first: %d %s, want 201 not replayed", first.Code, first.Body)
	}
	requireReplayOf(t, again, first)

	reused := post(r, "/accounts/7/payments", "pay-1", `{"amount":9999}`)
	if reused.Code != http.StatusUnprocessableEntity || problemType(t, reused) != idempotency.ProblemKeyReused {
		t.Errorf("key reused: %d %s, want 422 %s", reused.Code, reused.Body, idempotency.ProblemKeyReused)
	}
	if got := p.executions.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1", got)
	}

	p.hold, p.entered = make(chan struct{}), make(chan struct{})
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- post(r, "/accounts/7/payments", "pay-2", `{"amount":20}`) }()
	<-p.entered
	busy := post(r, "/accounts/7/payments", "pay-2", `{"amount":20}`)
	if busy.Code != http.StatusConflict || problemType(t, busy) != idempotency.ProblemInProgress ||
		busy.Header().Get("Retry-After") == "" {
		t.Errorf("while running: %d %v %s, want 409 %s with Retry-After", busy.Code, busy.Header(), busy.Body, idempotency.ProblemInProgress)
	}
	close(p.hold)
	second := <-done
	requireReplayOf(t, post(r, "/accounts/7/payments", "pay-2", `{"amount":20}`), second)
	if got := p.executions.Load(); got != 2 {
		t.Errorf("handler ran %d times for two keys, want 2", got)
	}
}

// post sends a POST with key and a JSON body straight to h.
func post(h http.Handler, path, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.HeaderIdempotencyKey, key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// requireReplayOf checks that got replays first: its status, body and
// allow-listed headers, marked Idempotent-Replayed.
func requireReplayOf(t *testing.T, got, first *httptest.ResponseRecorder) {
	t.Helper()
	if got.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("%s = %q, want true", idempotency.HeaderReplayed, got.Header().Get(idempotency.HeaderReplayed))
	}
	if got.Code != first.Code || got.Body.String() != first.Body.String() {
		t.Errorf("replay %d %q, want the first answer %d %q", got.Code, got.Body, first.Code, first.Body)
	}
	for _, h := range []string{"Content-Type", "Location"} {
		if got.Header().Get(h) != first.Header().Get(h) {
			t.Errorf("replayed %s %q, first %q", h, got.Header().Get(h), first.Header().Get(h))
		}
	}
}

// problemType returns the type member of a problem+json answer.
func problemType(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != idempotency.ContentTypeProblem {
		t.Errorf("Content-Type %q, want %s", ct, idempotency.ContentTypeProblem)
		return ""
	}
	var p struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Errorf("problem %s: %v", rec.Body, err)
	}
	return p.Type
}

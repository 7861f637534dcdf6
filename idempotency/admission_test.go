package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/saferetry/saferetry/idempotency"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestRequestBodyLimit(t *testing.T) {
	st := newStore(t)
	var ev events
	app := &counter{}
	h := idempotency.Middleware(st, idempotency.WithMaxRequestBody(10), idempotency.WithHook(ev.hook))(app)
	wantProblem(t, post(h, "a", `{"a":12345}`), http.StatusRequestEntityTooLarge, idempotency.ProblemRequestTooLarge)
	// Without a Content-Length the limit is found while reading.
	chunked := func(r *http.Request) { r.ContentLength = -1 }
	wantProblem(t, post(h, "b", `{"a":12345}`, chunked), http.StatusRequestEntityTooLarge, idempotency.ProblemRequestTooLarge)
	if n := app.calls.Load(); n != 0 {
		t.Fatalf("executions = %d, want 0", n)
	}
	if _, found, _ := st.Get(context.Background(), idempotency.Key{Key: "a"}); found {
		t.Fatalf("a too-large request left an entry")
	}
	if w := post(h, "c", `{"a":1234}`, chunked); w.Code != http.StatusCreated || !strings.Contains(w.Body.String(), `{\"a\":1234}`) {
		t.Fatalf("body at the limit: %d %s; want 201 echoing the body", w.Code, w.Body)
	}
	if e, ok := ev.find(idempotency.OutcomeTooLarge); !ok || e.Key != (idempotency.Key{Key: "a"}) || e.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("too_large event %+v (found %v) in %v; want key a, no scope, status 413", e, ok, ev.outcomes())
	}
}

func TestKeyHandling(t *testing.T) {
	t.Run("required key missing", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t), idempotency.WithKeyRequired(true))(app)
		wantProblem(t, post(h, "", `{}`), http.StatusBadRequest, idempotency.ProblemMissingKey)
		if app.calls.Load() != 0 {
			t.Fatal("handler ran")
		}
	})
	t.Run("optional key missing passes through", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t))(app)
		post(h, "", `{}`)
		if w := post(h, "", `{}`); w.Code != http.StatusCreated || app.calls.Load() != 2 {
			t.Fatalf("%d, executions %d; want both to run", w.Code, app.calls.Load())
		}
	})
	t.Run("malformed", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t))(app)
		for _, opt := range []reqOpt{
			withHeader(idempotency.HeaderIdempotencyKey, `"unterminated`),
			withHeader(idempotency.HeaderIdempotencyKey, strings.Repeat("k", 256)),
			func(r *http.Request) { r.Header[idempotency.HeaderIdempotencyKey] = []string{"a", "b"} },
			func(r *http.Request) { r.Header[idempotency.HeaderIdempotencyKey] = []string{""} },
		} {
			p := wantProblem(t, post(h, "", `{}`, opt), http.StatusBadRequest, idempotency.ProblemMalformedKey)
			if p.Detail == "" {
				t.Errorf("malformed-key problem has no detail")
			}
		}
		if app.calls.Load() != 0 {
			t.Fatal("handler ran")
		}
	})
	t.Run("sf-string and raw name the same key", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t))(app)
		first := post(h, "abc", `{}`)
		wantReplay(t, post(h, `"abc"`, `{}`), first)
	})
	t.Run("unprotected methods pass through", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t))(app)
		send(h, http.MethodPut, "k", `{}`)
		send(h, http.MethodPut, "k", `{}`)
		send(h, http.MethodGet, `"bad`, ``)
		if app.calls.Load() != 3 {
			t.Fatalf("executions = %d, want 3", app.calls.Load())
		}
	})
	t.Run("WithMethods", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t), idempotency.WithMethods(http.MethodPut))(app)
		first := send(h, http.MethodPut, "k", `{}`)
		wantReplay(t, send(h, http.MethodPut, "k", `{}`), first)
		post(h, "k2", `{}`)
		post(h, "k2", `{}`)
		if app.calls.Load() != 3 {
			t.Fatalf("executions = %d, want 3 (POST is no longer protected)", app.calls.Load())
		}
	})
	t.Run("method, path and query are part of the fingerprint", func(t *testing.T) {
		app := &counter{}
		h := idempotency.Middleware(newStore(t), idempotency.WithMethods(http.MethodPost, http.MethodPatch))(app)
		post(h, "k", `{}`)
		wantProblem(t, send(h, http.MethodPatch, "k", `{}`), http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
		otherQuery := func(r *http.Request) { r.URL.RawQuery = "a=1&b=3" }
		wantProblem(t, post(h, "k", `{}`, otherQuery), http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
		sameQueryReordered := func(r *http.Request) { r.URL.RawQuery = "a=1&b=2" }
		if w := post(h, "k", `{}`, sameQueryReordered); w.Header().Get(idempotency.HeaderReplayed) != "true" {
			t.Fatalf("reordered query: %d %s; want a replay", w.Code, w.Body)
		}
	})
}

func TestScope(t *testing.T) {
	st := newStore(t)
	app := &counter{}
	var ev events
	scope := func(r *http.Request) (string, error) {
		tenant := r.Header.Get("X-Tenant")
		if tenant == "" {
			return "", errors.New("no tenant")
		}
		return tenant, nil
	}
	h := idempotency.Middleware(st, idempotency.WithScope(scope), idempotency.WithHook(ev.hook))(app)
	a := post(h, "shared", `{}`, withHeader("X-Tenant", "a"))
	b := post(h, "shared", `{}`, withHeader("X-Tenant", "b"))
	if a.Code != http.StatusCreated || b.Code != http.StatusCreated || a.Body.String() == b.Body.String() {
		t.Fatalf("two tenants: %d %s / %d %s; want two executions", a.Code, a.Body, b.Code, b.Body)
	}
	wantReplay(t, post(h, "shared", `{}`, withHeader("X-Tenant", "a")), a)
	// A different body under another tenant's key is not a reuse.
	if w := post(h, "shared", `{"other":true}`, withHeader("X-Tenant", "c")); w.Code != http.StatusCreated {
		t.Fatalf("tenant c: %d", w.Code)
	}
	wantProblem(t, post(h, "shared", `{}`), http.StatusInternalServerError, idempotency.ProblemScopeUnavailable)
	if n := app.calls.Load(); n != 3 {
		t.Fatalf("executions = %d, want 3", n)
	}
	if e, ok := ev.find(idempotency.OutcomeReplay); !ok || e.Key != (idempotency.Key{Scope: "a", Key: "shared"}) {
		t.Fatalf("replay event key = %+v", e.Key)
	}
	if _, found, _ := st.Get(context.Background(), idempotency.Key{Scope: "b", Key: "shared"}); !found {
		t.Fatalf("no entry under scope b")
	}
}

// TestOuterBodyLimitIs413 checks that a body cut short by an outer
// http.MaxBytesReader is answered like the Middleware's own limit.
func TestOuterBodyLimitIs413(t *testing.T) {
	app := &counter{}
	h := idempotency.Middleware(newStore(t))(app)
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 4)
		h.ServeHTTP(w, r)
	})
	wantProblem(t, post(outer, "k", `{"a":12345}`, func(r *http.Request) { r.ContentLength = -1 }),
		http.StatusRequestEntityTooLarge, idempotency.ProblemRequestTooLarge)
	if app.calls.Load() != 0 {
		t.Fatal("handler ran")
	}
}

func TestHandlerSeesClaimAndBody(t *testing.T) {
	st := newStore(t)
	var gotKey idempotency.Key
	var gotToken int64
	var gotBody string
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ok1, ok2 bool
		gotKey, ok1 = idempotency.ScopedKeyFromContext(r.Context())
		gotToken, ok2 = idempotency.TokenFromContext(r.Context())
		if !ok1 || !ok2 {
			t.Errorf("claim missing from the context")
		}
		var v map[string]any
		_ = json.NewDecoder(r.Body).Decode(&v)
		gotBody = fmt.Sprint(v)
	})
	h := idempotency.Middleware(st, idempotency.WithScope(func(*http.Request) (string, error) { return "t1", nil }))(app)
	w := post(h, `"my key"`, `{"a":1}`)
	if w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if gotKey != (idempotency.Key{Scope: "t1", Key: "my key"}) || gotToken <= 0 || gotBody != "map[a:1]" {
		t.Fatalf("handler saw key %+v token %d body %s", gotKey, gotToken, gotBody)
	}
	if _, ok := idempotency.TokenFromContext(context.Background()); ok {
		t.Fatalf("token found in a bare context")
	}
	// A handler that writes nothing completes with an empty 200.
	r := post(h, `"my key"`, `{"a":1}`)
	if r.Code != http.StatusOK || r.Body.Len() != 0 || r.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("replay of an empty 200: %d %q", r.Code, r.Body)
	}
}

// TestHandlerContextFollowsTheRequest checks that the handler's context keeps
// the request context's values and cancellation, also through contexts
// derived from it.
func TestHandlerContextFollowsTheRequest(t *testing.T) {
	type ctxKey struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "outer"))
	defer cancel()
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		child, stop := context.WithTimeout(r.Context(), time.Hour)
		defer stop()
		if got := child.Value(ctxKey{}); got != "outer" {
			t.Errorf("request value = %v, want outer", got)
		}
		if k, ok := idempotency.KeyFromContext(child); !ok || k != "k" {
			t.Errorf("KeyFromContext(derived) = %+v, %v", k, ok)
		}
		cancel()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Errorf("the request's cancellation did not reach a derived context")
		}
	})
	h := idempotency.Middleware(newStore(t))(app)
	post(h, "k", `{}`, func(r *http.Request) { *r = *r.WithContext(ctx) })
}

func TestMiddlewarePanicsOnNilStore(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	idempotency.Middleware(nil)
}

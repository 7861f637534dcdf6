package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/saferetry/saferetry/idempotency"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// panicValue is what the handler of an outcome policy case panics with.
func panicValue(name string) any {
	if strings.HasPrefix(name, "ErrAbortHandler") {
		return http.ErrAbortHandler // net/http's quiet abort: released all the same
	}
	return "boom"
}

func TestOutcomePolicy(t *testing.T) {
	tests := []struct {
		name   string
		status int
		panics bool
		stored bool
	}{
		{"200 stored", http.StatusOK, false, true},
		{"201 stored", http.StatusCreated, false, true},
		{"400 stored", http.StatusBadRequest, false, true},
		{"404 stored", http.StatusNotFound, false, true},
		{"409 stored", http.StatusConflict, false, true},
		{"408 released", http.StatusRequestTimeout, false, false},
		{"429 released", http.StatusTooManyRequests, false, false},
		{"500 released", http.StatusInternalServerError, false, false},
		{"503 released", http.StatusServiceUnavailable, false, false},
		{"panic released", 0, true, false},
		{"ErrAbortHandler released", 0, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			var ev events
			app := &counter{}
			app.before = func(http.ResponseWriter, *http.Request) int {
				if app.calls.Load() == 1 {
					if tt.panics {
						panic(panicValue(tt.name))
					}
					return tt.status
				}
				return http.StatusCreated
			}
			h := idempotency.Middleware(st, idempotency.WithHook(ev.hook))(app)
			var first string
			func() {
				defer func() {
					if p := recover(); (p != nil) != tt.panics || (p != nil && p != panicValue(tt.name)) {
						t.Errorf("recovered %v, want panic=%v with the handler's value", p, tt.panics)
					}
				}()
				w := post(h, "k", `{}`)
				first = w.Body.String()
				if w.Code != tt.status {
					t.Errorf("first status = %d, want %d (the handler's own answer is sent)", w.Code, tt.status)
				}
			}()
			_, found, err := st.Get(context.Background(), idempotency.Key{Key: "k"})
			if err != nil || found != tt.stored {
				t.Fatalf("after the first request: found = %v (%v), want %v", found, err, tt.stored)
			}
			w := post(h, "k", `{}`)
			if tt.stored {
				if app.calls.Load() != 1 || w.Header().Get(idempotency.HeaderReplayed) != "true" || w.Body.String() != first {
					t.Fatalf("retry: executions %d, %d %s; want a replay of %s", app.calls.Load(), w.Code, w.Body, first)
				}
				return
			}
			if app.calls.Load() != 2 || w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
				t.Fatalf("retry: executions %d, status %d; want the handler to run again", app.calls.Load(), w.Code)
			}
			rel, ok := ev.find(idempotency.OutcomeReleased)
			if !ok {
				t.Fatalf("no released event in %v", ev.outcomes())
			}
			if tt.panics != errors.Is(rel.Err, idempotency.ErrHandlerPanicked) {
				t.Fatalf("released event Err = %v", rel.Err)
			}
		})
	}
}

func TestOversizeResponse(t *testing.T) {
	st := newStore(t)
	var ev events
	var calls atomic.Int64
	big := strings.Repeat("x", 100)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		for i := 0; i < len(big); i += 10 {
			_, _ = w.Write([]byte(big[i : i+10]))
		}
	})
	h := idempotency.Middleware(st, idempotency.WithMaxResponseBody(16), idempotency.WithHook(ev.hook))(app)
	w := post(h, "k", `{}`)
	if w.Code != http.StatusCreated || w.Body.String() != big {
		t.Fatalf("first = %d %q; want the full response", w.Code, w.Body)
	}
	e, found, err := st.Get(context.Background(), idempotency.Key{Key: "k"})
	if err != nil || !found || e.Response == nil || !e.Response.Oversize || e.Response.Status != http.StatusCreated || len(e.Response.Body) != 0 {
		t.Fatalf("stored %+v (%v %v); want an oversize record of a 201", e, found, err)
	}
	for range 2 {
		r := post(h, "k", `{}`)
		p := wantProblem(t, r, http.StatusGone, idempotency.ProblemResponseTooLarge)
		if p.OriginalStatus != http.StatusCreated || r.Header().Get(idempotency.HeaderReplayed) != "true" {
			t.Fatalf("problem %+v replayed=%q", p, r.Header().Get(idempotency.HeaderReplayed))
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("executions = %d, want 1", calls.Load())
	}
	if _, ok := ev.find(idempotency.OutcomeOversize); !ok {
		t.Fatalf("events %v", ev.outcomes())
	}
}

func TestReplayHeaderAllowList(t *testing.T) {
	st := newStore(t)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Location", "/x/1")
		h.Set("ETag", `"v1"`)
		h.Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
		h.Add("Link", "</a>; rel=a")
		h.Add("Link", "</b>; rel=b")
		h.Set("Content-Location", "/x/1")
		h.Set("Set-Cookie", "session=secret")
		h.Set("Date", "Mon, 02 Jan 2006 15:04:05 GMT")
		h.Set("X-RateLimit-Remaining", "9")
		h.Set("RateLimit-Policy", "10;w=1")
		h.Set("Retry-After", "3")
		h.Set("X-Request-Id", "req-1")
		h.Set("X-Extra", "kept")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{}`))
	})
	h := idempotency.Middleware(st, idempotency.WithReplayHeaders("x-extra", "Set-Cookie", "X-RateLimit-Remaining"))(app)
	first := post(h, "k", `{}`)
	for _, name := range []string{"Set-Cookie", "X-Request-Id", "Date"} {
		if first.Header().Get(name) == "" {
			t.Errorf("first response lacks %s: the handler's own headers go out unchanged", name)
		}
	}
	replay := post(h, "k", `{}`)
	wantReplay(t, replay, first)
	for _, name := range []string{"Content-Type", "Location", "Etag", "Last-Modified", "Content-Location", "X-Extra"} {
		if got, want := replay.Header().Get(name), first.Header().Get(name); got != want {
			t.Errorf("replayed %s = %q, want %q", name, got, want)
		}
	}
	if got := replay.Header().Values("Link"); len(got) != 2 {
		t.Errorf("replayed Link = %q, want both values", got)
	}
	for _, name := range []string{"Set-Cookie", "Date", "X-Ratelimit-Remaining", "Ratelimit-Policy", "Retry-After", "X-Request-Id"} {
		if got := replay.Header().Get(name); got != "" {
			t.Errorf("replay carries %s: %q", name, got)
		}
	}
	e, _, _ := st.Get(context.Background(), idempotency.Key{Key: "k"})
	if _, ok := e.Response.Header["Set-Cookie"]; ok {
		t.Errorf("Set-Cookie was stored")
	}
}

func TestRecorderStatusRules(t *testing.T) {
	st := newStore(t)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusEarlyHints) // informational: dropped
		w.WriteHeader(http.StatusAccepted)
		w.WriteHeader(http.StatusInternalServerError) // superfluous: ignored
		_, _ = w.Write([]byte("ok"))
	})
	h := idempotency.Middleware(st)(app)
	first := post(h, "k", `{}`)
	if first.Code != http.StatusAccepted || first.Body.String() != "ok" {
		t.Fatalf("first = %d %q", first.Code, first.Body)
	}
	wantReplay(t, post(h, "k", `{}`), first)
}

// TestNoBodyStatuses checks that the buffering writer refuses a body after a
// 204 or 304, as net/http's own writer does, so none is stored or replayed.
func TestNoBodyStatuses(t *testing.T) {
	for _, status := range []int{http.StatusNoContent, http.StatusNotModified} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			st := newStore(t)
			var writeErr error
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
				_, writeErr = w.Write([]byte("body"))
			})
			h := idempotency.Middleware(st)(app)
			first := post(h, "k", `{}`)
			if first.Code != status || !errors.Is(writeErr, http.ErrBodyNotAllowed) {
				t.Fatalf("status %d, Write error %v; want %d and ErrBodyNotAllowed", first.Code, writeErr, status)
			}
			e, found, err := st.Get(context.Background(), idempotency.Key{Key: "k"})
			if err != nil || !found || e.Response == nil || len(e.Response.Body) != 0 {
				t.Fatalf("stored %+v (%v, %v); want a %d without a body", e.Response, found, err, status)
			}
			wantReplay(t, post(h, "k", `{}`), first)
		})
	}
}

func TestHookSequence(t *testing.T) {
	st := newStore(t)
	var ev events
	h := idempotency.Middleware(st, idempotency.WithHook(ev.hook), idempotency.WithKeyRequired(true))(&counter{})
	post(h, "k", `{}`)
	post(h, "k", `{}`)
	post(h, "k", `{"a":1}`)
	post(h, "", `{}`)
	post(h, `"`, `{}`)
	want := []idempotency.Outcome{idempotency.OutcomeNew, idempotency.OutcomeReplay, idempotency.OutcomeMismatch,
		idempotency.OutcomeMissingKey, idempotency.OutcomeMalformedKey}
	if got := ev.outcomes(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outcomes = %v, want %v", got, want)
	}
	if e := ev.got[0]; e.Status != http.StatusCreated || e.Token <= 0 || e.Key.Key != "k" {
		t.Fatalf("new event = %+v", e)
	}
}

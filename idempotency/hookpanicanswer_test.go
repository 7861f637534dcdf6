package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// statusWriter records the status written to it, 0 while none was.
type statusWriter struct {
	*httptest.ResponseRecorder
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseRecorder.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseRecorder.Write(b)
}

// TestHookPanicAnswerIsTheEvents checks that when a hook panics on an
// event given before its answer is written, the answer the event describes
// is written all the same before the hook's panic goes on: the status the
// hooks had (metrics beside the panicking hook count it) is the status
// sent, where the answer used to be left unwritten, the event telling of a
// status that never went out.
func TestHookPanicAnswerIsTheEvents(t *testing.T) {
	failing := errors.New("store down")
	for _, tc := range []struct {
		name string
		// store makes the case's store, around a fresh memstore.
		store func(t *testing.T) idempotency.Store
		opts  []idempotency.Option
		// status is the handler's; first, when set, is a body posted under
		// the key before, with the hook not armed.
		status    int
		first     string
		key, body string
	}{
		{name: "missing key", opts: []idempotency.Option{idempotency.WithKeyRequired(true)}, body: `{}`},
		{name: "malformed key", key: strings.Repeat("k", 300), body: `{}`},
		{name: "too large", opts: []idempotency.Option{idempotency.WithMaxRequestBody(1)}, body: `{"a":1}`},
		{name: "scope error", opts: []idempotency.Option{idempotency.WithScope(func(*http.Request) (string, error) { return "", failing })}},
		{name: "store unavailable", store: func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), claim: func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
				return idempotency.ClaimResult{}, failing
			}}
		}},
		{name: "in progress", store: func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), claim: func(_ context.Context, _ idempotency.Key, fp string, _, _ time.Duration) (idempotency.ClaimResult, error) {
				return idempotency.ClaimResult{Entry: idempotency.Entry{State: idempotency.StateInProgress, Fingerprint: fp, Token: 1, LeaseRemaining: time.Second}}, nil
			}}
		}},
		{name: "claim too late", store: func(t *testing.T) idempotency.Store {
			base := newStore(t)
			return &faultyStore{Store: base, claim: func(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
				res, err := base.Claim(ctx, k, fp, lease, ttl)
				res.LeaseRemaining = time.Nanosecond
				return res, err
			}}
		}},
		{name: "mismatch", first: `{"a":1}`},
		{name: "replay", first: `{}`},
		{name: "oversize", first: `{}`, opts: []idempotency.Option{idempotency.WithMaxResponseBody(8)}},
		{name: "new", status: http.StatusCreated},
		{name: "released", status: http.StatusBadGateway},
		{name: "store error after the run", status: http.StatusCreated, store: func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
				return idempotency.ErrResponseNotStorable // also for the marker: a failure Complete does not retry
			}}
		}},
		{name: "superseded", status: http.StatusCreated, store: func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
				return idempotency.ErrStaleToken
			}}
		}},
		{name: "transaction committed", status: http.StatusCreated, store: func(t *testing.T) idempotency.Store {
			return &fakeTxStore{Store: newStore(t)}
		}},
		{name: "transaction rolled back", status: http.StatusBadGateway, store: func(t *testing.T) idempotency.Store {
			return &fakeTxStore{Store: newStore(t)}
		}},
		{name: "commit failed", status: http.StatusCreated, store: func(t *testing.T) idempotency.Store {
			return &fakeTxStore{Store: newStore(t), commitErr: failing}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st idempotency.Store
			if tc.store != nil {
				st = tc.store(t)
			} else {
				st = newStore(t)
			}
			var armed atomic.Bool
			var got []idempotency.Event
			hook := func(e idempotency.Event) {
				if armed.Load() {
					got = append(got, e)
					panic("hook bug")
				}
			}
			opts := append([]idempotency.Option{idempotency.WithHook(hook)}, tc.opts...)
			h := idempotency.Middleware(st, opts...)(&counter{before: func(http.ResponseWriter, *http.Request) int { return tc.status }})
			key, body := tc.key, tc.body
			if key == "" && tc.name != "missing key" {
				key = "k"
			}
			if body == "" {
				body = `{}`
			}
			if tc.first != "" {
				if w := post(h, key, tc.first); w.Code != http.StatusCreated {
					t.Fatalf("first request: %d", w.Code)
				}
			}
			armed.Store(true)
			w := &statusWriter{ResponseRecorder: httptest.NewRecorder()}
			p := func() (p any) {
				defer func() { p = recover() }()
				r := httptest.NewRequest(http.MethodPost, "/ops?b=2&a=1", strings.NewReader(body)) // as post sends it
				r.Header.Set("Content-Type", "application/json")
				if key != "" {
					r.Header.Set(idempotency.HeaderIdempotencyKey, key)
				}
				h.ServeHTTP(w, r)
				return nil
			}()
			if p != "hook bug" {
				t.Fatalf("panic %v went on, want the hook's", p)
			}
			if len(got) != 1 {
				t.Fatalf("%d events, want 1", len(got))
			}
			if e := got[0]; e.Status == 0 || w.status != e.Status || w.Body.Len() == 0 {
				t.Errorf("event %s with status %d; the client got status %d with %d body bytes, want the event's status with its body",
					e.Outcome, e.Status, w.status, w.Body.Len())
			}
		})
	}
}

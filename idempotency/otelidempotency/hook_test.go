package otelidempotency_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/otelidempotency"
)

const body = `{"amount":10}`

var errDown = errors.New("store down")

// brokenStore fails Claim with errDown when claimErr, and answers Complete
// with ErrStaleToken (the claim was taken over) when stale.
type brokenStore struct {
	idempotency.Store
	claimErr, stale, decline bool
}

func (s brokenStore) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	switch {
	case s.claimErr:
		return idempotency.ClaimResult{}, errDown
	case s.decline:
		return idempotency.ClaimResult{}, idempotency.ErrClaimDeclined
	}
	return s.Store.Claim(ctx, k, fp, lease, ttl)
}

func (s brokenStore) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	if s.stale {
		return idempotency.ErrStaleToken
	}
	return s.Store.Complete(ctx, k, token, resp, ttl)
}

type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, errors.New("connection reset") }
func (failingBody) Close() error             { return nil }

// TestHookCountsEachOutcome: every outcome of the Middleware lands in
// saferetry.server.requests with its status, method and route, and in
// saferetry.server.request.duration unless it was answered on admission;
// no attribute carries the key.
func TestHookCountsEachOutcome(t *testing.T) {
	for _, tc := range []struct {
		name   string
		want   idempotency.Outcome
		status int // 0: no status attribute
		timed  bool
		run    func(t *testing.T, in *otelidempotency.Instrumentation)
	}{
		{"new", idempotency.OutcomeNew, 201, true, func(t *testing.T, in *otelidempotency.Instrumentation) {
			expect(t, post(serve(in, newStore(t), app{}), "key-new", body), 201)
		}},
		{"replay", idempotency.OutcomeReplay, 201, true, func(t *testing.T, in *otelidempotency.Instrumentation) {
			h := serve(in, newStore(t), app{})
			expect(t, post(h, "key-replay", body), 201)
			expect(t, post(h, "key-replay", body), 201)
		}},
		{"in progress", idempotency.OutcomeInProgress, 409, true, func(t *testing.T, in *otelidempotency.Instrumentation) {
			h, release := blocked(t, in, "key-busy")
			expect(t, post(h, "key-busy", body), 409)
			release()
		}},
		{"key reused", idempotency.OutcomeMismatch, 422, true, func(t *testing.T, in *otelidempotency.Instrumentation) {
			h := serve(in, newStore(t), app{})
			expect(t, post(h, "key-reused", body), 201)
			expect(t, post(h, "key-reused", `{"amount":11}`), 422)
		}},
		{"missing key", idempotency.OutcomeMissingKey, 400, false, func(t *testing.T, in *otelidempotency.Instrumentation) {
			expect(t, post(serve(in, newStore(t), app{}, idempotency.WithKeyRequired(true)), "", body), 400)
		}},
		{"malformed key", idempotency.OutcomeMalformedKey, 400, false, func(t *testing.T, in *otelidempotency.Instrumentation) {
			expect(t, post(serve(in, newStore(t), app{}), "a,b", body), 400)
		}},
		{"too large", idempotency.OutcomeTooLarge, 413, false, func(t *testing.T, in *otelidempotency.Instrumentation) {
			expect(t, post(serve(in, newStore(t), app{}, idempotency.WithMaxRequestBody(4)), "key-large", body), 413)
		}},
		{"body unreadable", idempotency.OutcomeBadRequest, 400, false, func(t *testing.T, in *otelidempotency.Instrumentation) {
			r := httptest.NewRequest(http.MethodPost, "/payments", nil)
			r.Body = failingBody{}
			r.Header.Set(idempotency.HeaderIdempotencyKey, "key-unreadable")
			w := httptest.NewRecorder()
			serve(in, newStore(t), app{}).ServeHTTP(w, r)
			expect(t, w, 400)
		}},
		{"scope error", idempotency.OutcomeScopeError, 500, false, func(t *testing.T, in *otelidempotency.Instrumentation) {
			noScope := idempotency.WithScope(func(*http.Request) (string, error) { return "", errors.New("no principal") })
			expect(t, post(serve(in, newStore(t), app{}, noScope), "key-scope", body), 500)
		}},
		{"released after 5xx", idempotency.OutcomeReleased, 502, true, func(t *testing.T, in *otelidempotency.Instrumentation) {
			expect(t, post(serve(in, newStore(t), app{before: func(*http.Request) int { return 502 }}), "key-5xx", body), 502)
		}},
		{"released after a panic", idempotency.OutcomeReleased, 0, true, func(t *testing.T, in *otelidempotency.Instrumentation) {
			h := serve(in, newStore(t), app{before: func(*http.Request) int { panic("handler bug") }})
			defer func() {
				if recover() == nil {
					t.Error("the panic did not go on")
				}
			}()
			post(h, "key-panic", body)
		}},
		{"store error", idempotency.OutcomeStoreError, 503, true, func(t *testing.T, in *otelidempotency.Instrumentation) {
			expect(t, post(serve(in, brokenStore{Store: newStore(t), claimErr: true}, app{}), "key-down", body), 503)
		}},
		{"declined", idempotency.OutcomeDeclined, 201, true, func(t *testing.T, in *otelidempotency.Instrumentation) {
			expect(t, post(serve(in, brokenStore{Store: newStore(t), decline: true}, app{}), "key-declined", body), 201)
		}},
		{"lease lost", idempotency.OutcomeLeaseLost, 409, true, func(t *testing.T, in *otelidempotency.Instrumentation) {
			expect(t, post(serve(in, brokenStore{Store: newStore(t), stale: true}, app{}), "key-lost", body), 409)
		}},
		{"oversize", idempotency.OutcomeOversize, 410, true, func(t *testing.T, in *otelidempotency.Instrumentation) {
			h := serve(in, newStore(t), app{}, idempotency.WithMaxResponseBody(4))
			expect(t, post(h, "key-oversize", body), 201)
			expect(t, post(h, "key-oversize", body), 410)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMeter(t)
			in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider))
			tc.run(t, in)
			got := m.collect(t)
			st := absent("http.response.status_code")
			if tc.status != 0 {
				st = status(tc.status)
			}
			want := []attribute.KeyValue{outcome(tc.want), st, attribute.String("http.request.method", "POST"), route}
			if n := got.sum(otelidempotency.MetricRequests, want...); n != 1 {
				t.Errorf("requests %v = %d, want 1; every attribute: %v", want, n, got.everyAttribute())
			}
			wantTimed := uint64(0)
			if tc.timed {
				wantTimed = 1
			}
			if n := got.count(otelidempotency.MetricRequestDuration, want...); n != wantTimed {
				t.Errorf("request.duration count %v = %d, want %d", want, n, wantTimed)
			}
			for _, a := range got.everyAttribute() {
				if strings.Contains(a, "key-") {
					t.Errorf("attribute %s carries the Idempotency-Key", a)
				}
			}
		})
	}
}

// expect checks the status of an answer.
func expect(t *testing.T, w *httptest.ResponseRecorder, code int) {
	t.Helper()
	if w.Code != code {
		t.Fatalf("status %d, want %d (body %s)", w.Code, code, w.Body)
	}
}

// blocked starts a request with key whose handler blocks until release is
// called, and returns the handler once it runs; release waits for that
// request's answer.
func blocked(t *testing.T, in *otelidempotency.Instrumentation, key string, opts ...idempotency.Option) (h http.Handler, release func()) {
	t.Helper()
	running, unblock := make(chan struct{}), make(chan struct{})
	var started atomic.Bool
	h = serve(in, newStore(t), app{before: func(*http.Request) int {
		if started.CompareAndSwap(false, true) {
			close(running)
			<-unblock
		}
		return 0
	}}, opts...)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post(h, key, body) }()
	<-running
	return h, func() {
		close(unblock)
		if w := <-done; w.Code != 201 {
			t.Errorf("the first request: %d, want 201", w.Code)
		}
	}
}

// TestTakeoversCounted: a request that takes over a claim whose holder
// died (its lease lapsed) runs and counts in saferetry.server.takeovers;
// a plain run does not.
func TestTakeoversCounted(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider))
	store := newStore(t)
	h := serve(in, store, app{})
	expect(t, post(h, "plain", body), 201)

	// A holder that claimed "orphan" and died: its lease lapses at once.
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	fp := idempotency.Fingerprint(r, []byte(body))
	k := idempotency.Key{Key: "orphan"}
	if _, err := store.Claim(context.Background(), k, fp, time.Millisecond, time.Hour); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		e, _, err := store.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if e.LeaseRemaining <= 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphan's lease did not lapse")
		}
		time.Sleep(time.Millisecond)
	}
	expect(t, post(h, "orphan", body), 201)

	got := m.collect(t)
	if n := got.sum(otelidempotency.MetricTakeovers, attribute.String("http.request.method", "POST"), route); n != 1 {
		t.Errorf("takeovers = %d, want 1", n)
	}
	if n := got.sum(otelidempotency.MetricRequests, outcome(idempotency.OutcomeNew)); n != 2 {
		t.Errorf("new = %d, want 2 (the takeover ran)", n)
	}
}

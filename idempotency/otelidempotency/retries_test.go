package otelidempotency_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/otelidempotency"
)

// tenantScope scopes each request by its X-Tenant header.
var tenantScope = idempotency.WithScope(func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil })

// TestRetriesByScope: with WithRetriesByScope, replays and 409s count per
// scope label in saferetry.server.retries; executions, key reuse and
// requests of other scopes do not count under the scope.
func TestRetriesByScope(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider),
		otelidempotency.WithRetriesByScope(func(scope string) string { return strings.ToUpper(scope) }))
	h, release := blocked(t, in, "op-1", tenantScope)
	// blocked's first request has no tenant: scope "".
	expect(t, post(h, "op-1", body), 409)
	release()
	expect(t, post(h, "op-1", body), 201) // replay in scope ""
	send := func(tenant, key, b string) int {
		w := postWith(h, key, b, "X-Tenant", tenant)
		return w.Code
	}
	if c := send("acme", "op-2", body); c != 201 {
		t.Fatalf("acme's first: %d", c)
	}
	for range 2 {
		if c := send("acme", "op-2", body); c != 201 {
			t.Fatalf("acme's retry: %d", c)
		}
	}
	if c := send("acme", "op-2", `{"amount":99}`); c != 422 {
		t.Fatalf("acme's reuse: %d", c)
	}

	got := m.collect(t)
	for _, c := range []struct {
		scope string
		o     idempotency.Outcome
		want  int64
	}{
		{"ACME", idempotency.OutcomeReplay, 2},
		{"ACME", idempotency.OutcomeMismatch, 0},
		{"ACME", idempotency.OutcomeNew, 0},
		{"", idempotency.OutcomeReplay, 1},
		{"", idempotency.OutcomeInProgress, 1},
	} {
		if n := got.sum(otelidempotency.MetricRetries, attribute.String("saferetry.scope", c.scope), outcome(c.o)); n != c.want {
			t.Errorf("retries of scope %q, %s = %d, want %d", c.scope, c.o, n, c.want)
		}
	}
}

// TestRetriesOffByDefault: without WithRetriesByScope there is no
// saferetry.server.retries and no attribute names a scope.
func TestRetriesOffByDefault(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider))
	h := serve(in, newStore(t), app{}, tenantScope)
	for range 2 {
		expect(t, postWith(h, "op", body, "X-Tenant", "acme"), 201)
	}
	got := m.collect(t)
	if _, ok := got[otelidempotency.MetricRetries]; ok {
		t.Errorf("%s exists without WithRetriesByScope", otelidempotency.MetricRetries)
	}
	for _, a := range got.everyAttribute() {
		if strings.Contains(a, "acme") {
			t.Errorf("attribute %s names the scope", a)
		}
	}
}

// lateStore is a Store whose claims come back with almost none of their
// lease left, as after a long stall on the way back from the store.
type lateStore struct{ idempotency.Store }

func (s lateStore) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, k, fp, lease, ttl)
	if res.Acquired {
		res.LeaseRemaining = time.Nanosecond
	}
	return res, err
}

// TestClaimTooLateIsNoRetry: a request whose own claim came back with too
// little of its lease left is answered 409 (OutcomeInProgress) without
// running, but it found the key free: it is no repeat of an operation
// already claimed or completed, and saferetry.server.retries does not
// count it, while saferetry.server.requests does.
func TestClaimTooLateIsNoRetry(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider),
		otelidempotency.WithRetriesByScope(func(string) string { return "all" }))
	h := serve(in, lateStore{newStore(t)}, app{})
	expect(t, post(h, "op-1", body), 409)
	got := m.collect(t)
	if n := got.sum(otelidempotency.MetricRequests, outcome(idempotency.OutcomeInProgress)); n != 1 {
		t.Errorf("requests in progress = %d, want 1", n)
	}
	if n := got.sum(otelidempotency.MetricRetries, outcome(idempotency.OutcomeInProgress)); n != 0 {
		t.Errorf("retries in progress = %d, want 0: the request claimed the key itself", n)
	}
}

// heldThenLateStore is a Store whose first Claim finds the key held by
// another request with the same fingerprint, and whose later claims are
// acquired with almost none of their lease left: a duplicate that waits
// for the holder, which lets the key go, and then claims it too late.
type heldThenLateStore struct {
	idempotency.Store
	claims int
}

func (s *heldThenLateStore) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	s.claims++
	if s.claims == 1 {
		return idempotency.ClaimResult{Entry: idempotency.Entry{State: idempotency.StateInProgress, Fingerprint: fp, Token: 1, LeaseRemaining: lease}}, nil
	}
	return lateStore{s.Store}.Claim(ctx, k, fp, lease, ttl)
}

// TestWaiterClaimingTooLateIsRetry: a request that found its key held by
// the same request, waited for it (WithWaitForResult), and then claimed
// the key with too little of its lease left is answered 409 like any
// duplicate that came while the first ran: it is a repeat of an operation
// already claimed, and saferetry.server.retries counts it, as it does
// the duplicate that did not wait.
func TestWaiterClaimingTooLateIsRetry(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider),
		otelidempotency.WithRetriesByScope(func(string) string { return "all" }))
	st := &heldThenLateStore{Store: newStore(t)}
	h := serve(in, st, app{}, idempotency.WithWaitForResult(time.Second))
	expect(t, post(h, "op-1", body), 409)
	if st.claims != 2 {
		t.Fatalf("%d claims, want 2: the request waited and claimed again", st.claims)
	}
	got := m.collect(t)
	if n := got.sum(otelidempotency.MetricRetries, outcome(idempotency.OutcomeInProgress)); n != 1 {
		t.Errorf("retries in progress = %d, want 1: the request found its key held by the same request", n)
	}
}

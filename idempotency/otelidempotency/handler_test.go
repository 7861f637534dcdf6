package otelidempotency_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/otelidempotency"
)

var postMethod = attribute.String("http.request.method", "POST")

// TestHandlerCountsClaimsAndTimesRuns: while a handler runs under a claim
// it counts in saferetry.server.claims.active, and once it returned its run
// is in saferetry.server.handler.duration; a duplicate answered 409 never
// ran, so it is in neither.
func TestHandlerCountsClaimsAndTimesRuns(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider))
	h, release := blocked(t, in, "busy")
	expect(t, post(h, "busy", body), 409)
	during := m.collect(t)
	if n := during.sum(otelidempotency.MetricClaimsActive, postMethod, route); n != 1 {
		t.Errorf("claims.active while the handler runs = %d, want 1", n)
	}
	if n := during.count(otelidempotency.MetricHandlerDuration); n != 0 {
		t.Errorf("handler.duration before the run ended: %d points, want 0", n)
	}
	release()
	after := m.collect(t)
	if n := after.sum(otelidempotency.MetricClaimsActive); n != 0 {
		t.Errorf("claims.active after the run = %d, want 0", n)
	}
	if n := after.count(otelidempotency.MetricHandlerDuration, postMethod, route); n != 1 {
		t.Errorf("handler.duration count = %d, want 1", n)
	}
}

// TestHandlerPassesUnclaimedRequests: a request the Middleware lets through
// without a claim is served but not measured as a run under one.
func TestHandlerPassesUnclaimedRequests(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider))
	h := serve(in, newStore(t), app{})
	expect(t, post(h, "", body), 201) // no key, none required: unprotected
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
	w := httptest.NewRecorder()
	in.Handler(app{}).ServeHTTP(w, r) // no Middleware at all
	expect(t, w, 201)
	got := m.collect(t)
	if n := got.count(otelidempotency.MetricHandlerDuration); n != 0 {
		t.Errorf("handler.duration of unclaimed requests: %d, want 0", n)
	}
}

// TestWaitersCounted: a duplicate that waits for the holder
// (WithWaitForResult) over a store with a Watcher counts in
// saferetry.server.waiters.active until it is answered, with the replay.
func TestWaitersCounted(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider))
	h, release := blocked(t, in, "waited", idempotency.WithWaitForResult(10*time.Second))
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post(h, "waited", body) }()
	store := attribute.String("saferetry.store.name", "test")
	for deadline := time.Now().Add(5 * time.Second); m.collect(t).sum(otelidempotency.MetricWaitersActive, store) != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the duplicate never counted as waiting")
		}
		time.Sleep(time.Millisecond)
	}
	release()
	if w := <-done; w.Code != 201 || w.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("the waiter got %d replayed=%q, want the replay", w.Code, w.Header().Get(idempotency.HeaderReplayed))
	}
	got := m.collect(t)
	if n := got.sum(otelidempotency.MetricWaitersActive); n != 0 {
		t.Errorf("waiters.active after the wait = %d, want 0", n)
	}
	if n := got.sum(otelidempotency.MetricRequests, outcome(idempotency.OutcomeReplay)); n != 1 {
		t.Errorf("replays = %d, want 1", n)
	}
}

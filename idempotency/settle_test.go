package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

var errBlip = errors.New("store blip")

// TestCompleteRetriedAfterTransientErrors checks that a Complete that fails
// a few times (a short outage) is retried with the same token until it is
// stored, so the key is completed and never runs again.
func TestCompleteRetriedAfterTransientErrors(t *testing.T) {
	base := newStore(t)
	var tries atomic.Int64
	st := &faultyStore{Store: base, complete: func(ctx context.Context, k idempotency.Key, tok int64, resp idempotency.Response, ttl time.Duration) error {
		if tries.Add(1) <= 3 {
			return errBlip
		}
		return base.Complete(ctx, k, tok, resp, ttl)
	}}
	var ev events
	app := &counter{}
	h := idempotency.Middleware(st, idempotency.WithHook(ev.hook))(app)
	first := post(h, "k", `{}`)
	if first.Code != http.StatusCreated {
		t.Fatalf("status = %d", first.Code)
	}
	if got := ev.outcomes(); len(got) != 1 || got[0] != idempotency.OutcomeNew {
		t.Fatalf("events %v, want only new", got)
	}
	wantReplay(t, post(h, "k", `{}`), first)
	if n := app.calls.Load(); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
}

// TestCompleteAppliedButAnswerLost checks that a Complete applied by the
// store whose answer was lost, so that its retry is refused as stale, is
// recognised as stored, not reported as a lost lease.
func TestCompleteAppliedButAnswerLost(t *testing.T) {
	base := newStore(t)
	var tries atomic.Int64
	st := &faultyStore{Store: base, complete: func(ctx context.Context, k idempotency.Key, tok int64, resp idempotency.Response, ttl time.Duration) error {
		err := base.Complete(ctx, k, tok, resp, ttl)
		if tries.Add(1) == 1 && err == nil {
			return fmt.Errorf("reply lost: %w", errBlip)
		}
		return err
	}}
	var ev events
	h := idempotency.Middleware(st, idempotency.WithHook(ev.hook))(&counter{})
	first := post(h, "k", `{}`)
	if got := ev.outcomes(); len(got) != 1 || got[0] != idempotency.OutcomeNew {
		t.Fatalf("events %v, want only new", got)
	}
	if tries.Load() != 2 {
		t.Fatalf("Complete tried %d times, want 2", tries.Load())
	}
	wantReplay(t, post(h, "k", `{}`), first)
}

// TestUnstorableResponseRecordedAsNotReplayable checks that a response the
// store cannot keep is recorded as completed but not replayable: retries get
// 410 and the handler never runs again, instead of the key staying in
// progress and running again after its lease.
func TestUnstorableResponseRecordedAsNotReplayable(t *testing.T) {
	base := newStore(t)
	st := &faultyStore{Store: base, complete: func(ctx context.Context, k idempotency.Key, tok int64, resp idempotency.Response, ttl time.Duration) error {
		if !resp.Oversize {
			return fmt.Errorf("header has a byte I cannot keep: %w", idempotency.ErrResponseNotStorable)
		}
		return base.Complete(ctx, k, tok, resp, ttl)
	}}
	var ev events
	app := &counter{}
	h := idempotency.Middleware(st, idempotency.WithHook(ev.hook))(app)
	if w := post(h, "k", `{}`); w.Code != http.StatusCreated {
		t.Fatalf("first = %d, want the handler's 201", w.Code)
	}
	if got := ev.outcomes(); len(got) != 1 || got[0] != idempotency.OutcomeNew {
		t.Fatalf("events %v, want only new", got)
	}
	p := wantProblem(t, post(h, "k", `{}`), http.StatusGone, idempotency.ProblemResponseTooLarge)
	if p.OriginalStatus != http.StatusCreated {
		t.Fatalf("original_status = %d, want 201", p.OriginalStatus)
	}
	if n := app.calls.Load(); n != 1 {
		t.Fatalf("executions = %d, want 1", n)
	}
}

// TestReleaseRetried checks that a Release that fails once is retried, so a
// retry of a failed operation runs at once instead of waiting for the lease.
func TestReleaseRetried(t *testing.T) {
	base := newStore(t)
	var tries atomic.Int64
	st := &faultyStore{Store: base, release: func(ctx context.Context, k idempotency.Key, tok int64) error {
		if tries.Add(1) == 1 {
			return errBlip
		}
		return base.Release(ctx, k, tok)
	}}
	app := &counter{}
	app.before = func(http.ResponseWriter, *http.Request) int {
		if app.calls.Load() == 1 {
			return http.StatusBadGateway
		}
		return 0
	}
	h := idempotency.Middleware(st, idempotency.WithLease(time.Hour))(app)
	if w := post(h, "k", `{}`); w.Code != http.StatusBadGateway {
		t.Fatalf("first = %d", w.Code)
	}
	if w := post(h, "k", `{}`); w.Code != http.StatusCreated {
		t.Fatalf("retry = %d %s; the failed release left the key held", w.Code, w.Body)
	}
}

// TestReleaseAppliedButAnswerLost checks that a Release applied by the
// store whose answer was lost, so that its retry is refused as stale, is
// recognised as released (the key no longer held by the token), not
// reported as a lost lease.
func TestReleaseAppliedButAnswerLost(t *testing.T) {
	base := newStore(t)
	var tries atomic.Int64
	st := &faultyStore{Store: base, release: func(ctx context.Context, k idempotency.Key, tok int64) error {
		err := base.Release(ctx, k, tok)
		if tries.Add(1) == 1 && err == nil {
			return fmt.Errorf("reply lost: %w", errBlip)
		}
		return err
	}}
	var ev events
	app := &counter{}
	app.before = func(http.ResponseWriter, *http.Request) int { return http.StatusBadGateway }
	h := idempotency.Middleware(st, idempotency.WithHook(ev.hook))(app)
	if w := post(h, "k", `{}`); w.Code != http.StatusBadGateway {
		t.Fatalf("status = %d, want the handler's 502", w.Code)
	}
	if got := ev.outcomes(); len(got) != 1 || got[0] != idempotency.OutcomeReleased {
		t.Fatalf("events %v, want only released", got)
	}
	if tries.Load() != 2 {
		t.Fatalf("Release tried %d times, want 2", tries.Load())
	}
}

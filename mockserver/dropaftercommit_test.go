package mockserver_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/mockserver"
)

// blipLedger fails its first Pay, as a shared ledger does during a blip,
// and works from then on.
type blipLedger struct {
	mockserver.Ledger
	failed atomic.Bool
}

func (l *blipLedger) Pay(ctx context.Context, ref string, keep time.Duration, p mockserver.Payment) (mockserver.Payment, bool, error) {
	if l.failed.CompareAndSwap(false, true) {
		return mockserver.Payment{}, false, errors.New("ledger blip")
	}
	return l.Ledger.Pay(ctx, ref, keep, p)
}

// TestDropAfterCommitWaitsForACommit: an execution answered 503 (the
// ledger unavailable: nothing paid, nothing stored, the claim released)
// does not use up a DropAfterCommitNext. It used to: its connection was
// dropped, the inspection recorded dropped_after_commit for an attempt
// that committed nothing, and the retry that did commit was answered
// normally, so the client never saw a timeout after commit.
func TestDropAfterCommitWaitsForACommit(t *testing.T) {
	srv := mockserver.New(mockserver.WithLedger(&blipLedger{Ledger: mockserver.NewMemoryLedger(nil)}))
	defer srv.Close()
	srv.DropAfterCommitNext(1)

	const key = "drop-wait-1"
	resp, b, err := send(t, srv, "POST", "/payments", key, payBody)
	if err != nil {
		t.Errorf("attempt 1, answered 503 with nothing stored, was dropped: %v", err)
	} else if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("attempt 1: %d %s, want 503", resp.StatusCode, b)
	}
	if st := srv.Stats(key); len(st.History) != 1 || st.History[0].Outcome != mockserver.OutcomeExecuted || st.Payments != 0 {
		t.Errorf("attempt 1 recorded as %+v (payments %d), want one executed attempt and no payment", st.History, st.Payments)
	}
	if f := srv.Faults(); f.DropAfterCommit != 1 {
		t.Errorf("drops pending after an execution that stored nothing: %d, want 1", f.DropAfterCommit)
	}

	// The retry commits the payment: its answer is the one to drop. On a
	// fresh connection, since net/http's Transport resends a request that
	// carries an Idempotency-Key when a reused connection fails.
	srv.Client().CloseIdleConnections()
	if resp, b, err := send(t, srv, "POST", "/payments", key, payBody); err == nil {
		t.Errorf("the execution that committed was answered %d %s; DropAfterCommitNext(1) should have dropped it", resp.StatusCode, b)
	}
	st := srv.Stats(key)
	if len(st.History) != 2 || st.History[1].Outcome != mockserver.OutcomeDropped || st.Payments != 1 {
		t.Errorf("history %+v (payments %d), want the second attempt dropped after paying", st.History, st.Payments)
	}
	if f := srv.Faults(); f.DropAfterCommit != 0 {
		t.Errorf("drops still pending: %d", f.DropAfterCommit)
	}
}

// supersedingStore answers every Complete with ErrStaleToken, as a store
// does to a holder whose claim was taken over after its lease lapsed.
type supersedingStore struct{ idempotency.Store }

func (s supersedingStore) Complete(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
	return idempotency.ErrStaleToken
}

// TestDropAfterCommitNotOnLostLease: an execution whose lease was lost ran
// the payment but could not store its outcome; the middleware answers it
// 409 in place of its 201. That answer is sent, not dropped, the attempt is
// not recorded as dropped_after_commit, and the drop stays pending.
func TestDropAfterCommitNotOnLostLease(t *testing.T) {
	ms := memstore.New()
	defer ms.Close()
	srv := mockserver.New(mockserver.WithStore(supersedingStore{ms}))
	defer srv.Close()
	srv.DropAfterCommitNext(1)

	const key = "drop-lost-1"
	resp, b, err := send(t, srv, "POST", "/payments", key, payBody)
	if err != nil {
		t.Fatalf("an execution whose outcome was not stored was dropped: %v", err)
	}
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("answered %d %s, want the middleware's 409 for a lost lease", resp.StatusCode, b)
	}
	if st := srv.Stats(key); len(st.History) != 1 || st.History[0].Outcome == mockserver.OutcomeDropped {
		t.Errorf("history %+v, want one attempt, not dropped", st.History)
	}
	if f := srv.Faults(); f.DropAfterCommit != 1 {
		t.Errorf("drops pending: %d, want 1", f.DropAfterCommit)
	}
}

// TestDropAfterCommitOnStoredRefusal: a 400 or 402 answer is stored like a
// 201, so it is dropped like one, and the retry gets it replayed.
func TestDropAfterCommitOnStoredRefusal(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
	}{
		{"invalid payment", `{"amount":0,"currency":"EUR","recipient":"a"}`, http.StatusBadRequest},
		{"insufficient funds", `{"amount":9999999999,"currency":"EUR","recipient":"a"}`, http.StatusPaymentRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mockserver.New()
			defer srv.Close()
			srv.DropAfterCommitNext(1)
			if resp, b, err := send(t, srv, "POST", "/payments", "drop-refused-1", tc.body); err == nil {
				t.Errorf("a stored %d was answered %d %s, want it dropped", tc.status, resp.StatusCode, b)
			}
			resp, b := mustSend(t, srv, "POST", "/payments", "drop-refused-1", tc.body)
			if resp.StatusCode != tc.status || resp.Header.Get(idempotency.HeaderReplayed) != "true" {
				t.Errorf("retry: %d %s (replayed %q), want the stored %d replayed", resp.StatusCode, b, resp.Header.Get(idempotency.HeaderReplayed), tc.status)
			}
			if st := srv.Stats("drop-refused-1"); len(st.History) != 2 || st.History[0].Outcome != mockserver.OutcomeDropped {
				t.Errorf("history %+v, want the first attempt dropped", st.History)
			}
		})
	}
}

// An answer over the middleware's response limit streams while the
// payment runs, before its (oversize) outcome is stored: the drop still
// fires, cutting the answer short, and is recorded as dropped on that
// attempt, the only record of it.
func TestDropAfterCommitCutsAStreamedAnswer(t *testing.T) {
	srv := mockserver.New(mockserver.WithIdempotencyOptions(idempotency.WithMaxResponseBody(16)))
	defer srv.Close()
	srv.DropAfterCommitNext(1)
	srv.Client().CloseIdleConnections()
	if resp, b, err := send(t, srv, "POST", "/payments", "streamed-drop", payBody); err == nil {
		t.Errorf("an execution that stored its outcome (oversize) answered %d %.60s..., want it cut short", resp.StatusCode, b)
	}
	if f := srv.Faults(); f.DropAfterCommit != 0 {
		t.Errorf("%d drops still pending", f.DropAfterCommit)
	}
	st := srv.Stats("streamed-drop")
	if st.Executions != 1 || len(st.History) != 1 || st.History[0].Outcome != mockserver.OutcomeDropped || st.History[0].Status != http.StatusCreated {
		t.Errorf("executions %d, history %+v; want one execution, one attempt: 201 dropped", st.Executions, st.History)
	}
	resp, _ := mustSend(t, srv, "POST", "/payments", "streamed-drop", payBody)
	if resp.StatusCode != http.StatusGone {
		t.Errorf("the retry: %d, want 410 (the answer was too large to keep)", resp.StatusCode)
	}
}

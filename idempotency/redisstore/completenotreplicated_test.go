package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

// claimedAlready is a WithWait store whose claims were replicated when
// they were made: its Claim goes through a store without WithWait on the
// same Redis, as if the primary's only replica had been there for the
// claim and left before the outcome was recorded.
type claimedAlready struct {
	*redisstore.Store
	plain *redisstore.Store
}

func (s claimedAlready) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	return s.plain.Claim(ctx, k, fp, lease, ttl)
}

// TestCompleteNotReplicatedIsNotReportedStored: under WithWait, a Complete
// whose outcome no replica acknowledged fails with ErrNotReplicated (the
// outcome is on the primary only, and a failover loses it: the claim, which
// the replica holds, lapses and a retry runs the handler again). The
// Middleware retried it; the retry found the claim already completed with
// its own token (ErrStaleToken) and, reading the entry back from the
// primary, reported the outcome stored: an OutcomeNew event with no error,
// though WithWait promises that an outcome is acknowledged only once the
// replicas hold it. It must be reported as the store error it is.
func TestCompleteNotReplicatedIsNotReportedStored(t *testing.T) {
	ev := eventNotReplicated(t, http.StatusCreated, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"ok":true}`)
	})
	if ev.Outcome != idempotency.OutcomeStoreError || !errors.Is(ev.Err, redisstore.ErrNotReplicated) {
		t.Errorf("event of a request whose outcome no replica acknowledged = %s, Err %v; want %s matching ErrNotReplicated",
			ev.Outcome, ev.Err, idempotency.OutcomeStoreError)
	}
}

// eventNotReplicated sends one request to handler through a Middleware
// over a claimedAlready store with WithWait on a Redis without replicas,
// checks that it is answered want, and returns its one event.
func eventNotReplicated(t *testing.T, want int, handler http.HandlerFunc) idempotency.Event {
	t.Helper()
	rdb := ownRedis(t) // no replica
	s := claimedAlready{
		Store: redisstore.New(rdb, redisstore.WithWait(1, 50*time.Millisecond)),
		plain: redisstore.New(rdb),
	}
	var mu sync.Mutex
	var events []idempotency.Event
	mw := idempotency.Middleware(s, idempotency.WithHook(func(ev idempotency.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	}))
	srv := httptest.NewServer(mw(handler))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got := post(ctx, srv.URL, "k1", `{}`); got.Status != want {
		t.Fatalf("POST = %d, want %d", got.Status, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 {
		t.Fatalf("events = %+v, want one", events)
	}
	return events[0]
}

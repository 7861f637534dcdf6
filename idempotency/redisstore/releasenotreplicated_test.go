package redisstore_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

// TestReleaseSentAgainWaitsAgain: under WithWait, a Release that no
// replica acknowledged fails with ErrNotReplicated: the claim is released
// on the primary only, and a failover brings it back, every retry of the
// key answered "in progress" for the rest of the lease. The Release sent
// again (as the Middleware does with any failed one) found the entry
// already released, wrote nothing, so that nothing was waited for, and
// answered ErrStaleToken, as if released and replicated; it must report
// ErrNotReplicated again while no replica holds the release.
func TestReleaseSentAgainWaitsAgain(t *testing.T) {
	rdb := ownRedis(t) // no replica
	plain := redisstore.New(rdb)
	waiting := redisstore.New(rdb, redisstore.WithWait(1, 50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k := idempotency.Key{Scope: "s", Key: "k"}
	res, err := plain.Claim(ctx, k, "fp", 10*time.Second, time.Minute) // replicated, say
	if err != nil || !res.Acquired {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	for try := 1; try <= 2; try++ {
		if err := waiting.Release(ctx, k, res.Token); !errors.Is(err, redisstore.ErrNotReplicated) {
			t.Errorf("Release #%d on a primary without replicas = %v, want ErrNotReplicated", try, err)
		}
	}
}

// TestReleaseNotReplicatedIsNotReportedReleased: the Middleware retried a
// Release that failed with ErrNotReplicated; the retry answered
// ErrStaleToken, the entry read back from the primary showed the claim
// released, and the Middleware reported an OutcomeReleased event with no
// error: a release that no replica held, which a failover undoes, passed
// for done. It must be reported as the store error it is.
func TestReleaseNotReplicatedIsNotReportedReleased(t *testing.T) {
	ev := eventNotReplicated(t, http.StatusInternalServerError, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError) // not stored: the claim is released
	})
	if ev.Outcome != idempotency.OutcomeStoreError || !errors.Is(ev.Err, redisstore.ErrNotReplicated) {
		t.Errorf("event of a request whose release no replica acknowledged = %s, Err %v; want %s matching ErrNotReplicated",
			ev.Outcome, ev.Err, idempotency.OutcomeStoreError)
	}
}

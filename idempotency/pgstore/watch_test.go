package pgstore_test

import (
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

func woken(ch <-chan struct{}, within time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(within):
		return false
	}
}

// TestWatchAcrossInstances checks that a request waiting on one instance is
// woken by NOTIFY when another instance, on a pool of its own, completes or
// releases the entry, and not by other entries' completions.
func TestWatchAcrossInstances(t *testing.T) {
	holder := newStore(t, nil)
	waiter := pgstore.New(newPool(t), pgstore.WithTable(holder.Table()))
	t.Cleanup(func() { _ = waiter.Close() })
	ctx := ctxT(t)
	for _, settle := range []string{"complete", "release"} {
		t.Run(settle, func(t *testing.T) {
			k := idempotency.Key{Scope: "watch\x00" + settle, Key: "k"}
			other := idempotency.Key{Scope: "watch\x00" + settle, Key: "other"}
			r, err := holder.Claim(ctx, k, "fp", time.Minute, time.Hour)
			if err != nil || !r.Acquired {
				t.Fatal(r, err)
			}
			ro, err := holder.Claim(ctx, other, "fp", time.Minute, time.Hour)
			if err != nil || !ro.Acquired {
				t.Fatal(ro, err)
			}
			ch, stop, err := waiter.Watch(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			if err := holder.Complete(ctx, other, ro.Token, idempotency.Response{Status: 201}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if woken(ch, 200*time.Millisecond) {
				t.Fatal("the completion of another entry woke the waiter")
			}
			if settle == "complete" {
				err = holder.Complete(ctx, k, r.Token, idempotency.Response{Status: 201}, time.Hour)
			} else {
				err = holder.Release(ctx, k, r.Token)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !woken(ch, 5*time.Second) {
				t.Fatalf("%s on the other instance did not wake the waiter", settle)
			}
		})
	}
}

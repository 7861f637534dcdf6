package scenario

import (
	"context"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// woken reports whether ch is closed within d.
func woken(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// WatchAcrossInstances checks a store's idempotency.Watcher across
// instances: holder and waiter are two Stores over the same data (two
// processes, as it were); a request watching an entry on waiter is woken
// when holder completes or releases it, and not by another entry's
// completion.
func WatchAcrossInstances(t *testing.T, holder, waiter idempotency.Store) {
	t.Helper()
	w, ok := waiter.(idempotency.Watcher)
	if !ok {
		t.Fatalf("scenario: %T is not an idempotency.Watcher", waiter)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, settle := range []string{"complete", "release"} {
		t.Run(settle, func(t *testing.T) {
			acquire := func(k idempotency.Key) int64 {
				r, err := holder.Claim(ctx, k, "fp", time.Minute, time.Hour)
				if err != nil || !r.Acquired {
					t.Fatal(r, err)
				}
				return r.Token
			}
			k := idempotency.Key{Scope: "watch\x00" + settle, Key: "k"}
			other := idempotency.Key{Scope: "watch\x00" + settle, Key: "other"}
			tok, otherTok := acquire(k), acquire(other)
			ch, stop, err := w.Watch(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			if err := holder.Complete(ctx, other, otherTok, idempotency.Response{Status: 201}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if woken(ch, 200*time.Millisecond) {
				t.Fatal("the completion of another entry woke the waiter")
			}
			if settle == "complete" {
				err = holder.Complete(ctx, k, tok, idempotency.Response{Status: 201}, time.Hour)
			} else {
				err = holder.Release(ctx, k, tok)
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

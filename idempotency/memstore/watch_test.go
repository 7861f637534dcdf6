package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

func fired(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(50 * time.Millisecond):
		return false
	}
}

// TestWatchWakesOnCompleteAndRelease checks that Complete and Release of a
// key wake its watchers, and only its own.
func TestWatchWakesOnCompleteAndRelease(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	for _, settle := range []string{"complete", "release"} {
		t.Run(settle, func(t *testing.T) {
			k := idempotency.Key{Scope: settle, Key: "k"}
			other := idempotency.Key{Scope: settle, Key: "other"}
			r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
			if err != nil || !r.Acquired {
				t.Fatal(r, err)
			}
			ch, stop, err := s.Watch(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			chOther, stopOther, _ := s.Watch(ctx, other)
			defer stopOther()
			if err := s.Renew(ctx, k, r.Token, time.Minute); err != nil || fired(ch) {
				t.Fatalf("a renewal (err %v) woke the watcher", err)
			}
			if settle == "complete" {
				err = s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201}, time.Hour)
			} else {
				err = s.Release(ctx, k, r.Token)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !fired(ch) {
				t.Fatalf("%s did not wake the watcher", settle)
			}
			if fired(chOther) {
				t.Fatalf("%s of %v woke the watcher of %v", settle, k, other)
			}
		})
	}
}

func TestWatchHonoursContext(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Watch(ctx, idempotency.Key{Key: "k"}); err == nil {
		t.Fatal("Watch with a done context succeeded")
	}
}

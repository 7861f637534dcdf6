package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// CompletionWakes claims k on st, watches it on w, completes it, and fails
// t unless the watch is woken within within: what a store's tests of its
// watch connection check once that connection was replaced. st and w may
// be one store, or two Stores over the same data (another instance's).
func CompletionWakes(t testing.TB, ctx context.Context, w idempotency.Watcher, st idempotency.Store, k idempotency.Key, within time.Duration) {
	t.Helper()
	c, err := st.Claim(ctx, k, "fp", time.Minute, time.Hour)
	if err != nil || !c.Acquired {
		t.Fatalf("Claim(%q) = %+v, %v", k.Key, c, err)
	}
	settled, stop, err := w.Watch(ctx, k)
	if err != nil {
		t.Fatalf("Watch(%q): %v", k.Key, err)
	}
	defer stop()
	if err := st.Complete(ctx, k, c.Token, idempotency.Response{Status: 201}, time.Hour); err != nil {
		t.Fatalf("Complete(%q): %v", k.Key, err)
	}
	select {
	case <-settled:
	case <-time.After(within):
		t.Fatalf("the completion of %q did not wake its waiter within %v", k.Key, within)
	}
}

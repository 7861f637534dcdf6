package idempotency

import (
	"context"
	"fmt"
	"testing"
)

type storeCtxTestKey struct{}

// TestStoreCtxString: a storeCtx prints as the context it stands for
// does, and so do the contexts derived from it, and printing it while the
// keeper ends it is no data race (run with -race).
func TestStoreCtxString(t *testing.T) {
	parent := context.WithValue(context.Background(), storeCtxTestKey{}, "v")
	stands, cancelStands := context.WithCancel(context.WithoutCancel(parent))
	defer cancelStands()
	want := fmt.Sprint(stands)
	c := &storeCtx{parent: parent}
	done := make(chan string)
	go func() { done <- fmt.Sprint(c) }()
	c.end()
	if got := <-done; got != want {
		t.Errorf("a storeCtx prints as %q, want %q", got, want)
	}
	child, cancel := context.WithCancel(c)
	defer cancel()
	if got, want := fmt.Sprint(child), want+".WithCancel"; got != want {
		t.Errorf("a context derived from a storeCtx prints as %q, want %q", got, want)
	}
}

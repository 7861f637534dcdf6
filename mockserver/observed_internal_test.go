package mockserver

import (
	"context"
	"errors"
	"testing"
)

type otherKey struct{}

// TestObservedCarriesStateAndContext: the context observe gives the
// handler finds the request's state under stateKey{} and every other
// value in the request's own context.
func TestObservedCarriesStateAndContext(t *testing.T) {
	o := &observed{Context: context.WithValue(context.Background(), otherKey{}, "own")}
	o.st.key = "k"
	if st := stateFrom(o); st != &o.st {
		t.Fatalf("stateFrom = %p, want the observed state %p", st, &o.st)
	}
	if v := o.Value(otherKey{}); v != "own" {
		t.Fatalf("Value(otherKey{}) = %v, want the request's own value", v)
	}
	if st := stateFrom(context.Background()); st == nil || st.key != "" {
		t.Fatalf("stateFrom without observe = %+v, want a fresh state", st)
	}
}

// TestObservedCancelsWithTheRequest: a context derived from observed, as
// the Middleware derives its claim's, ends when the request's context
// ends, at once, as a child of the request's own (no goroutine of the
// context package watching in between), with its cause.
func TestObservedCancelsWithTheRequest(t *testing.T) {
	reqCtx, cancel := context.WithCancelCause(context.Background())
	o := &observed{Context: reqCtx}
	child, stop := context.WithCancel(o)
	defer stop()
	gone := errors.New("client gone")
	cancel(gone)
	select {
	case <-child.Done():
	default:
		t.Fatal("the derived context is not done when the request's context is canceled")
	}
	if c := context.Cause(child); c != gone {
		t.Fatalf("Cause = %v, want %v", c, gone)
	}
}

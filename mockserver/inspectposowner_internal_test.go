package mockserver

import (
	"testing"
	"time"
)

// TestInspectorPositionIsItsOwn: a position one inspector's attempt gave
// is no position in another's, which finds the key by itself. A request
// carries its position in its state, which the payment handler of another
// server finds when a handler middleware (WithHandlerMiddleware) hands it
// the request of the server it wraps.
func TestInspectorPositionIsItsOwn(t *testing.T) {
	at := time.Now()
	var a, b inspector
	a.attempt("a-0")
	pos := b.attempt("b-0") // the same turn, and place, as a's "a-0"
	a.execution("b-0", pos)
	if got := a.stats("a-0"); got.Executions != 0 {
		t.Errorf("a counts b's execution of b-0 under a-0: %+v", got)
	}
	if got := a.stats("b-0"); got.Executions != 1 {
		t.Errorf("a counts %d executions of b-0, want 1", got.Executions)
	}

	b.attempt("b-1")
	pos = b.attempt("b-2") // a place a's newer table does not have
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("answered with b's position: panic %v", p)
			}
		}()
		a.answered("b-2", pos, Attempt{Status: 201, Outcome: OutcomeExecuted}.timed(at))
	}()
	if got := a.stats("b-2"); len(got.History) != 1 {
		t.Errorf("a records %d answers of b-2, want 1", len(got.History))
	}
}

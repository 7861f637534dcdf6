package mockserver

import "github.com/saferetry/saferetry/idempotency"

// outcomeSettled is the middleware's hook (idempotency.WithHook). It takes
// a pending DropAfterCommitNext for an execution whose outcome the
// middleware reports stored (idempotency.OutcomeNew: a 201, 402 or 400
// answer). An execution that stored nothing (answered 503 because the
// ledger was unavailable or its delay aborted, its lease lost, its outcome
// not kept by a failing store) leaves the drop to the next execution that
// commits. The middleware reports the outcome on the request's goroutine
// before it sends a buffered answer, so not a byte of it reaches the
// client; an answer over the middleware's response limit streams while
// the handler runs, and is cut short instead (see observe).
func (s *Server) outcomeSettled(ev idempotency.Event) {
	if ev.Outcome != idempotency.OutcomeNew {
		return
	}
	st, ok := ev.Context().Value(stateKey{}).(*reqState)
	if ok && st.executed.Load() && s.faults.takeDrop() {
		st.drop.Store(true)
	}
}

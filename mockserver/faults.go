package mockserver

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// MaxFaultCount bounds the faults of each kind (failures, dropped answers,
// delays) that may be pending at once on a Server: a count that would take
// the queue past it is refused (FailNext, DropAfterCommitNext and DelayNext
// panic, the admin API answers 400), so that a typo cannot exhaust memory.
const MaxFaultCount = 10_000

// faults holds the pending injected faults. Each kind is a queue consumed by
// the requests it applies to, first come first served.
//
// pending spares every request the mutex while no fault is set: it holds a
// bit for each kind with something pending, stored under the mutex after
// every change, so a take that finds the bit clear, having loaded it after
// the fault's add stored it, cannot miss the fault, and takes themselves
// still count under the mutex.
type faults struct {
	mu      sync.Mutex
	pending atomic.Uint32   // pendingFail | pendingDrop | pendingDelay | pendingLatency
	fail    []int           // statuses for the next protected requests
	drop    int             // executions whose answer is dropped
	delay   []time.Duration // delays for the next executions
	latency time.Duration   // added to every API request
}

// The bits of faults.pending.
const (
	pendingFail uint32 = 1 << iota
	pendingDrop
	pendingDelay
	pendingLatency
)

// changed stores the pending bits of the faults. The caller holds the
// mutex and has just changed them.
func (f *faults) changed() {
	var bits uint32
	if len(f.fail) > 0 {
		bits |= pendingFail
	}
	if f.drop > 0 {
		bits |= pendingDrop
	}
	if len(f.delay) > 0 {
		bits |= pendingDelay
	}
	if f.latency > 0 {
		bits |= pendingLatency
	}
	f.pending.Store(bits)
}

// none reports, without the mutex, that no fault of the kind bit is
// pending.
func (f *faults) none(bit uint32) bool { return f.pending.Load()&bit == 0 }

// Faults is a snapshot of the faults still pending on a Server, as Faults
// and GET /_mock/faults report them. It is a copy: changing it changes
// nothing on the Server. The zero value means no fault is pending. Each
// snapshot has slices of its own: it may be read from several goroutines at
// once, but not changed while others read it.
type Faults struct {
	// Fail lists the statuses the next protected requests will be answered
	// with, in order.
	Fail []int `json:"fail"`
	// DropAfterCommit is how many executions still have their answer
	// dropped.
	DropAfterCommit int `json:"drop_after_commit"`
	// Delays lists the delays of the next executions, in order.
	Delays []time.Duration `json:"-"`
	// DelaysMS is Delays in milliseconds, for the HTTP API.
	DelaysMS []int64 `json:"delay_ms"`
	// Latency is added to every request of the payments API; 0 means none.
	Latency time.Duration `json:"-"`
	// LatencyMS is Latency in milliseconds, for the HTTP API.
	LatencyMS int64 `json:"latency_ms"`
}

func (f *faults) snapshot() Faults {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := Faults{
		Fail:            append([]int{}, f.fail...),
		DropAfterCommit: f.drop,
		Delays:          append([]time.Duration{}, f.delay...),
		DelaysMS:        make([]int64, len(f.delay)),
		Latency:         f.latency,
		LatencyMS:       f.latency.Milliseconds(),
	}
	for i, d := range f.delay {
		out.DelaysMS[i] = d.Milliseconds()
	}
	return out
}

// checkCount refuses a negative count, or one that would take pending
// faults of a kind past MaxFaultCount.
func checkCount(n, pending int) error {
	if n < 0 {
		return fmt.Errorf("negative count %d", n)
	}
	if n > MaxFaultCount-pending {
		return fmt.Errorf("count %d would take the pending faults of this kind past %d (%d pending)", n, MaxFaultCount, pending)
	}
	return nil
}

// enqueue appends n copies of v to the fault queue q, unless checkCount
// refuses n. The caller holds the faults' mutex.
func enqueue[T any](q *[]T, n int, v T) error {
	if err := checkCount(n, len(*q)); err != nil {
		return err
	}
	*q = append(*q, slices.Repeat([]T{v}, n)...)
	return nil
}

// dequeue takes the first fault of the queue q; ok is false, and v the zero
// value, when none is pending. The caller holds the faults' mutex.
func dequeue[T any](q *[]T) (v T, ok bool) {
	if len(*q) == 0 {
		return v, false
	}
	v, *q = (*q)[0], (*q)[1:]
	return v, true
}

func (f *faults) addFail(n, status int) error {
	if status < 400 || status > 599 {
		return fmt.Errorf("injected status %d is not in 400..599", status)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.changed()
	return enqueue(&f.fail, n, status)
}

func (f *faults) addDrop(n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.changed()
	if err := checkCount(n, f.drop); err != nil {
		return err
	}
	f.drop += n
	return nil
}

func (f *faults) addDelay(n int, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("negative delay %v", d)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.changed()
	return enqueue(&f.delay, n, d)
}

func (f *faults) setLatency(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("negative latency %v", d)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.changed()
	f.latency = d
	return nil
}

func (f *faults) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.changed()
	f.fail, f.drop, f.delay, f.latency = nil, 0, nil, 0
}

// takeFail consumes the next injected failure; 0 means none is pending.
func (f *faults) takeFail() int {
	if f.none(pendingFail) {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.changed()
	s, _ := dequeue(&f.fail)
	return s
}

func (f *faults) takeDrop() bool {
	if f.none(pendingDrop) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.changed()
	if f.drop == 0 {
		return false
	}
	f.drop--
	return true
}

func (f *faults) takeDelay() (time.Duration, bool) {
	if f.none(pendingDelay) {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.changed()
	return dequeue(&f.delay)
}

func (f *faults) getLatency() time.Duration {
	if f.none(pendingLatency) {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.latency
}

// FailNext makes the next n requests to POST /payments be answered with
// status (a problem of type ProblemInjectedFailure) before anything runs: no
// claim, no execution. The answer carries no Retry-After. Calls add up:
// FailNext(2, 503) then FailNext(1, 500) answers 503, 503, 500. It panics if
// n is negative, would take the pending failures past MaxFaultCount, or
// status is not in 400..599. It is safe for concurrent use.
func (s *Server) FailNext(n, status int) {
	if err := s.faults.addFail(n, status); err != nil {
		panic(fmt.Errorf("mockserver: %w", err))
	}
}

// DropAfterCommitNext makes the next n executions of a payment whose
// outcome the idempotency middleware stores (answered 201, 402 or 400) have
// the connection closed without a byte of the answer: the client sees a
// transport error for a request that took effect. A retry with the same key
// receives the stored answer. An execution that stores nothing (a 503 when
// the ledger is unavailable, a lost lease, a store that fails to keep the
// outcome) is answered as usual and leaves the drop to the next execution
// that commits. An answer larger than the middleware's response limit
// (idempotency.WithMaxResponseBody) streams while the payment runs: its
// connection is closed in the middle of the body instead, and the retry
// gets 410, as the answer was too large to keep. Calls add up. It panics
// if n is negative or
// would take the pending drops past MaxFaultCount. It is safe for concurrent
// use.
func (s *Server) DropAfterCommitNext(n int) {
	if err := s.faults.addDrop(n); err != nil {
		panic(fmt.Errorf("mockserver: %w", err))
	}
}

// DelayNext makes each of the next n executions of a payment wait d before
// it runs, while its key stays claimed: a duplicate arriving meanwhile meets
// 409 in progress (or waits, per idempotency.WithWaitForResult). If the
// client goes away during the delay, the payment does not run and the claim
// is released. Calls add up. It panics if n or d is negative, or if n would
// take the pending delays past MaxFaultCount. It is safe for concurrent use.
func (s *Server) DelayNext(n int, d time.Duration) {
	if err := s.faults.addDelay(n, d); err != nil {
		panic(fmt.Errorf("mockserver: %w", err))
	}
}

// SetLatency adds d to every request of the payments API (not the admin
// API) from now on, before anything else happens; 0 removes it. The
// latency does not count against the read timeout (WithReadTimeout): after
// it, the rest of the request's body has the whole read timeout to arrive.
// A request whose client goes away during the latency is dropped unanswered
// and not counted as an attempt. It panics if d is negative. It is safe for
// concurrent use.
func (s *Server) SetLatency(d time.Duration) {
	if err := s.faults.setLatency(d); err != nil {
		panic(fmt.Errorf("mockserver: %w", err))
	}
}

// ClearFaults drops every pending injected fault and the latency. It is
// safe for concurrent use.
func (s *Server) ClearFaults() { s.faults.clear() }

// Faults reports the faults still pending. It is safe for concurrent use.
func (s *Server) Faults() Faults { return s.faults.snapshot() }

// ExpireKeys makes every idempotency key seen so far expire at once, as if
// its TTL had passed: the next request with any earlier key executes anew.
// It works by moving the server to a fresh key scope, so it works with any
// store; old entries stay in the store until their own TTL. Servers sharing
// a store each keep their own scope: call ExpireKeys on each of them (they
// stay in step when they all started together and each gets the same number
// of calls). Inspection counters are kept. It is safe for concurrent use.
func (s *Server) ExpireKeys() {
	s.epoch.Add(1)
}

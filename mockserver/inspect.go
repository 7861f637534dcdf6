package mockserver

import (
	"context"
	"sync"
	"time"
)

// Outcome says how the server answered one attempt; the zero value ("") is
// none of the outcomes below.
type Outcome string

// The outcomes an Attempt can have.
const (
	// OutcomeExecuted: the payment handler ran and its answer was sent.
	OutcomeExecuted Outcome = "executed"
	// OutcomeDropped: the payment handler ran, its outcome was stored, and
	// the connection was closed without an answer (DropAfterCommitNext).
	OutcomeDropped Outcome = "dropped_after_commit"
	// OutcomeReplayed: the stored answer of an earlier execution was sent
	// (Idempotent-Replayed: true).
	OutcomeReplayed Outcome = "replayed"
	// OutcomeInProgress: another attempt with the key was still executing;
	// answered 409.
	OutcomeInProgress Outcome = "in_progress"
	// OutcomeKeyReused: the key was used before with another payload;
	// answered 422.
	OutcomeKeyReused Outcome = "key_reused"
	// OutcomeInjectedFailure: answered by FailNext before anything ran.
	OutcomeInjectedFailure Outcome = "injected_failure"
	// OutcomeRejected: answered by the idempotency middleware without
	// running anything for another reason (missing or malformed key, store
	// unavailable, request too large, ...); see Status.
	OutcomeRejected Outcome = "rejected"
)

// maxHistory bounds the attempts kept per key; the counters stay exact.
const maxHistory = 64

// Attempt is one request to POST /payments as the server saw it: how and
// when it was answered. It is a plain value, safe to copy; compare Status
// and Outcome, since the timing differs on every run.
type Attempt struct {
	// Status is the status answered; 0 when the connection was dropped.
	Status int `json:"status"`
	// Outcome is how the request was answered.
	Outcome Outcome `json:"outcome"`
	// At is when the request arrived, before any injected latency, in UTC.
	// The gaps between the At of a key's attempts are the client's waits
	// between its retries (plus the time each attempt took).
	At time.Time `json:"at"`
	// Duration is how long the server took to answer: from arrival to the
	// answer's status line (or the dropped connection), injected latency
	// and delays, a wait for the first request and the payment included.
	Duration time.Duration `json:"-"`
	// DurationMS is Duration in milliseconds, for the HTTP API.
	DurationMS float64 `json:"duration_ms"`
}

// timed is a with its timing: it arrived at at and is answered now.
func (a Attempt) timed(at time.Time) Attempt {
	a.At, a.Duration = at.UTC(), time.Since(at)
	a.DurationMS = float64(a.Duration) / float64(time.Millisecond)
	return a
}

// KeyStats is what the server recorded for one Idempotency-Key. The zero
// value (with Key set) describes a key never seen.
type KeyStats struct {
	// Key is the Idempotency-Key, "" for requests without one.
	Key string `json:"key"`
	// Attempts counts the requests to POST /payments that carried the key,
	// whatever their answer.
	Attempts int `json:"attempts"`
	// Executions counts how many times the payment handler ran for the key
	// on this server. Exactly-once means 1 (after ExpireKeys or Reset, a key
	// may execute again); with several servers, sum them, or read Payments.
	Executions int `json:"executions"`
	// Payments counts the payments in the ledger made under the key: the
	// proof of exactly-once that holds across servers sharing a ledger, and
	// across a run that died and its re-run (which found the first run's
	// payment). It is 1 for an operation that paid once.
	Payments int `json:"payments"`
	// History lists the first 64 attempts in the order they were answered.
	History []Attempt `json:"history"`
}

// inspector counts attempts and executions per key.
type inspector struct {
	mu    sync.Mutex
	keys  map[string]*KeyStats
	order []string // keys in the order first seen
}

func (in *inspector) entryLocked(key string) *KeyStats {
	if in.keys == nil {
		in.keys = make(map[string]*KeyStats)
	}
	ks, ok := in.keys[key]
	if !ok {
		ks = &KeyStats{Key: key, History: []Attempt{}}
		in.keys[key] = ks
		in.order = append(in.order, key)
	}
	return ks
}

// attempt counts a request on arrival, so a client that got an answer never
// observes a count that misses its own attempt.
func (in *inspector) attempt(key string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.entryLocked(key).Attempts++
}

// answered records how an attempt was answered; it runs before the answer's
// first byte is written.
func (in *inspector) answered(key string, a Attempt) {
	in.mu.Lock()
	defer in.mu.Unlock()
	ks := in.entryLocked(key)
	if len(ks.History) < maxHistory {
		ks.History = append(ks.History, a)
	}
}

func (in *inspector) execution(key string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.entryLocked(key).Executions++
}

func (in *inspector) stats(key string) KeyStats {
	in.mu.Lock()
	defer in.mu.Unlock()
	ks, ok := in.keys[key]
	if !ok {
		return KeyStats{Key: key, History: []Attempt{}}
	}
	out := *ks
	out.History = append([]Attempt{}, ks.History...)
	return out
}

func (in *inspector) all() []KeyStats {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]KeyStats, 0, len(in.order))
	for _, k := range in.order {
		ks := *in.keys[k]
		ks.History = append([]Attempt{}, ks.History...)
		out = append(out, ks)
	}
	return out
}

func (in *inspector) reset() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.keys, in.order = nil, nil
}

// Executions reports how many times the payment handler ran for key. It is
// safe for concurrent use.
func (s *Server) Executions(key string) int { return s.insp.stats(key).Executions }

// Attempts reports how many requests to POST /payments carried key,
// whatever their answer. It is safe for concurrent use.
func (s *Server) Attempts(key string) int { return s.insp.stats(key).Attempts }

// Stats reports everything recorded for key; a key never seen has zero
// counts. It is safe for concurrent use.
func (s *Server) Stats(key string) KeyStats {
	ks := s.insp.stats(key)
	ks.Payments = s.paymentsByKey()[key]
	return ks
}

// Keys reports the stats of every key this server saw, in the order first
// seen. It is safe for concurrent use.
func (s *Server) Keys() []KeyStats {
	all := s.insp.all()
	byKey := s.paymentsByKey()
	for i := range all {
		all[i].Payments = byKey[all[i].Key]
	}
	return all
}

// paymentsByKey counts the ledger's payments per idempotency key.
func (s *Server) paymentsByKey() map[string]int {
	byKey := map[string]int{}
	for _, p := range s.Payments() {
		byKey[p.IdempotencyKey]++
	}
	return byKey
}

// Payments returns every payment in the server's ledger, oldest first (with
// a shared ledger, those of every server sharing it), or nil when the ledger
// cannot be read. It is safe for concurrent use.
func (s *Server) Payments() []Payment {
	ps, err := s.ledger.Payments(context.Background())
	if err != nil {
		s.log(context.Background(), "mockserver: reading the ledger failed", "error", err)
		return nil
	}
	return ps
}

// Balance returns the balance of currency (three letters, any case) in minor
// units: its opening balance less the payments made in it, or 0 when the
// ledger cannot be read. It is safe for concurrent use.
func (s *Server) Balance(currency string) int64 {
	b, err := s.ledger.Balance(context.Background(), upper(currency))
	if err != nil {
		s.log(context.Background(), "mockserver: reading the ledger failed", "error", err)
		return 0
	}
	return b
}

// Reset brings the server back to its initial state: no payments, initial
// balances, no recorded attempts, no pending faults, and every key expired
// (see ExpireKeys). It is safe for concurrent use; requests running during
// Reset may be recorded on either side of it.
func (s *Server) Reset() {
	s.faults.clear()
	s.ExpireKeys()
	if err := s.ledger.Reset(context.Background()); err != nil {
		s.log(context.Background(), "mockserver: resetting the ledger failed", "error", err)
	}
	s.insp.reset()
}

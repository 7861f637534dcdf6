package mockserver

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Outcome says how the server answered one attempt; the zero value ("") is
// none of the outcomes below. It is a plain string value, safe to share.
type Outcome string

// The outcomes an Attempt can have.
const (
	// OutcomeExecuted: the payment handler ran and its answer was sent.
	OutcomeExecuted Outcome = "executed"
	// OutcomeDropped: the payment handler ran, the idempotency middleware
	// reported its outcome stored, and the connection was closed without an
	// answer (DropAfterCommitNext; Status 0), or in the middle of one that
	// was streaming (Status the answer's). An execution whose outcome was
	// not stored is never recorded as dropped.
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
	// OutcomeRejected: answered without running anything for another
	// reason, by the idempotency middleware (missing or malformed key,
	// store unavailable, request too large, ...) or before it (a body
	// that is not JSON, 415); see Status.
	OutcomeRejected Outcome = "rejected"
)

// maxHistory bounds the attempts kept per key; the counters stay exact.
const maxHistory = 64

// Attempt is one request to POST /payments as the server saw it: how and
// when it was answered. It is a plain value, safe to copy and to read from
// several goroutines at once; compare Status and Outcome, since the timing
// differs on every run.
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
// value (with Key set) describes a key never seen. Stats and Keys return a
// copy with a History of its own, which the server does not change: it may
// be read from several goroutines at once, but not changed while others
// read it.
type KeyStats struct {
	// Key is the Idempotency-Key, "" for requests without one. A value
	// that is no valid key is counted as sent, under its first 256 bytes
	// when it is longer (a valid key is at most 255).
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

// MaxInspectedKeys bounds the keys the server keeps counts of (see
// KeyStats), so that a long run with a new key per request does not grow
// it without end: past it, the server forgets the keys used least
// recently, half of the limit at a time. A key is kept for at least
// MaxInspectedKeys/2 new keys after its last attempt; a key forgotten and
// seen again starts from zero counts. The payments of the ledger are never
// forgotten (KeyStats.Payments, Payments).
const MaxInspectedKeys = 1 << 16

// maxCountedKey bounds the bytes of a key the server counts under: an
// Idempotency-Key that is not a valid key is counted under the value as
// sent, which could be as long as net/http lets a header be, and a value
// longer than a valid key's 255 bytes is counted under its first 256.
const maxCountedKey = 256

// countedKey is the key that key is counted under (see maxCountedKey).
func countedKey(key string) string { return key[:min(len(key), maxCountedKey)] }

// inspector counts attempts and executions per key, of at most
// MaxInspectedKeys keys: in two tables, the keys first seen or used since
// the last turn (cur) and those of the turn before (old). A key of old
// that is used again moves to cur; when cur holds half the limit, the
// tables turn, and the keys of old that did not move are forgotten.
type inspector struct {
	mu       sync.Mutex
	cur, old keyTable
	seen     int64  // keys first seen, to number them (keyRecord.seen)
	turn     uint64 // cur's number from tableNumbers, 0 until a position in it is taken (turnLocked)
}

// keyPos is where attempt put a key's record, for the calls on the same
// request after it, which find the record there rather than by its key: a
// position in the inspector's newer table, valid while that table has not
// turned old, nor been reset, since. The zero value is no position.
type keyPos struct {
	turn uint64 // the number of the table it is in (inspector.turn)
	i    int32
}

// tableNumbers numbers the newer tables of every inspector in the
// process, from 1, so that a keyPos names its table: a request's position
// is none in another server's inspector, which a request reaches through
// a handler middleware (WithHandlerMiddleware) that hands it on to
// another server's payment handler.
var tableNumbers atomic.Uint64

// turnLocked returns the number of the inspector's newer table, which it
// takes from tableNumbers when the table has none yet. The lock must be
// held.
func (in *inspector) turnLocked() uint64 {
	if in.turn == 0 {
		in.turn = tableNumbers.Add(1)
	}
	return in.turn
}

// keyTable keeps a key's counts and first attempt in a record without
// pointers, its string in a byte slice of all the keys, and only the
// attempts after the first elsewhere, so that the collector, which scans
// every pointer the server keeps, has nothing to scan per key. The zero
// value is empty and ready.
type keyTable struct {
	index strIndex                  // a key's position in recs
	text  textChunks                // the keys, a run each
	recs  records[keyRecord]        // in the order the keys came in
	more  map[int32][]attemptRecord // each key's attempts after its first, up to maxHistory
}

// keyRecord is what the inspector keeps of one key.
type keyRecord struct {
	text                 textPos // the key is the n bytes of its run in the inspector's text
	n                    int32
	moved                bool  // the key moved to the newer table, which holds it now
	seen                 int64 // when it was first seen, in order: Keys' order
	attempts, executions int
	first                attemptRecord // valid when history > 0
	history              int           // attempts recorded, up to maxHistory
}

// attemptRecord is an Attempt without pointers.
type attemptRecord struct {
	sec      int64 // At as time.Unix's arguments
	nsec     int32
	status   int32
	duration time.Duration
	outcome  uint8 // an index in outcomes
}

// outcomes are the Outcomes an attemptRecord tells apart; any other is
// kept as "", which no part of the server answers with.
var outcomes = [...]Outcome{"", OutcomeExecuted, OutcomeDropped, OutcomeReplayed, OutcomeInProgress,
	OutcomeKeyReused, OutcomeInjectedFailure, OutcomeRejected}

func recordAttempt(a Attempt) attemptRecord {
	r := attemptRecord{sec: a.At.Unix(), nsec: int32(a.At.Nanosecond()), status: int32(a.Status), duration: a.Duration}
	for i, o := range outcomes {
		if o == a.Outcome {
			r.outcome = uint8(i)
		}
	}
	return r
}

// attempt is r as Attempt.timed made it.
func (r attemptRecord) attempt() Attempt {
	return Attempt{Status: int(r.status), Outcome: outcomes[r.outcome], At: time.Unix(r.sec, int64(r.nsec)).UTC(),
		Duration: r.duration, DurationMS: float64(r.duration) / float64(time.Millisecond)}
}

// key returns the bytes of the key at i.
func (t *keyTable) key(i int32) []byte {
	r := t.recs.at(i)
	return t.text.bytes(r.text, 0, int(r.n))
}

// holds reports whether the key at i is key.
func (t *keyTable) holds(i int32, key string) bool { return string(t.key(i)) == key }

// find returns the position of key, whose strHash is h, if t holds it
// and it did not move, and whether no key of t has the hash (free, for
// add).
func (t *keyTable) find(h uint64, key string) (i int32, ok, free bool) {
	i, ok, free = t.index.get(h, key, t.holds)
	return i, ok && !t.recs.at(i).moved, free
}

// add adds key, whose strHash is h, with r's counts and history more (its
// attempts after the first); free is what find last reported of h, or
// false (see strIndex.set).
func (t *keyTable) add(h uint64, key string, r keyRecord, more []attemptRecord, free bool) int32 {
	r.text, r.n, r.moved = t.text.add(key), int32(len(key)), false
	i := t.recs.add(r)
	t.index.set(h, key, i, t.holds, free)
	if len(more) > 0 {
		if t.more == nil {
			t.more = make(map[int32][]attemptRecord)
		}
		t.more[i] = more
	}
	return i
}

// stats is the KeyStats of the key at i, without its payments.
func (t *keyTable) stats(i int32) KeyStats {
	r := t.recs.at(i)
	ks := KeyStats{Key: string(t.key(i)), Attempts: r.attempts, Executions: r.executions, History: make([]Attempt, 0, r.history)}
	if r.history > 0 {
		ks.History = append(ks.History, r.first.attempt())
		for _, a := range t.more[i] {
			ks.History = append(ks.History, a.attempt())
		}
	}
	return ks
}

// recordLocked returns the table and position of the record of key,
// which it makes for a key not seen, or moves to cur from old. The lock
// must be held.
func (in *inspector) recordLocked(key string) (*keyTable, int32, *keyRecord) {
	key = countedKey(key)
	h := strHash(key) // one hash for both tables, and for the key's new record
	i, ok, free := in.cur.find(h, key)
	if ok {
		return &in.cur, i, in.cur.recs.at(i)
	}
	var r keyRecord
	var more []attemptRecord
	if i, ok, _ := in.old.find(h, key); ok {
		old := in.old.recs.at(i)
		r, more = *old, in.old.more[i]
		old.moved = true
	} else {
		in.seen++
		r.seen = in.seen
	}
	if in.cur.recs.len() >= MaxInspectedKeys/2 {
		in.old, in.cur = in.cur, keyTable{}
		in.turn = 0
		free = true // the new table is empty
	}
	i = in.cur.add(h, key, r, more, free)
	return &in.cur, i, in.cur.recs.at(i)
}

// recordAtLocked is recordLocked(key) for a key whose record attempt put
// at pos, which it returns without a lookup while pos is valid. The lock
// must be held.
func (in *inspector) recordAtLocked(key string, pos keyPos) (*keyTable, int32, *keyRecord) {
	if pos.turn != 0 && pos.turn == in.turn {
		return &in.cur, pos.i, in.cur.recs.at(pos.i)
	}
	return in.recordLocked(key)
}

// attempt counts a request on arrival, so a client that got an answer never
// observes a count that misses its own attempt. It returns where the key's
// record is, for the request's calls after it.
func (in *inspector) attempt(key string) keyPos {
	in.mu.Lock()
	defer in.mu.Unlock()
	_, i, r := in.recordLocked(key)
	r.attempts++
	return keyPos{turn: in.turnLocked(), i: i}
}

// answered records how an attempt was answered; it runs before the answer's
// first byte is written.
// It returns the attempt's place in the key's history, -1 when the history
// is full, for dropped. pos is what attempt returned for key, or the zero
// keyPos.
func (in *inspector) answered(key string, pos keyPos, a Attempt) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	t, i, r := in.recordAtLocked(key, pos)
	switch {
	case r.history == 0:
		r.first = recordAttempt(a)
	case r.history < maxHistory:
		if t.more == nil {
			t.more = make(map[int32][]attemptRecord)
		}
		t.more[i] = append(t.more[i], recordAttempt(a))
	default:
		return -1
	}
	r.history++
	return int(r.history) - 1
}

// dropped marks the attempt at place n of key's history (as answered
// returned it) as dropped: its answer had begun to go out when its
// connection was cut.
func (in *inspector) dropped(key string, n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	t, i, r := in.recordLocked(key)
	rec := &r.first
	switch {
	case n < 0 || n >= int(r.history):
		return
	case n > 0:
		rec = &t.more[i][n-1]
	}
	rec.outcome = recordAttempt(Attempt{Outcome: OutcomeDropped}).outcome
}

// execution counts a run of the payment handler. pos is what attempt
// returned for key, or the zero keyPos.
func (in *inspector) execution(key string, pos keyPos) {
	in.mu.Lock()
	defer in.mu.Unlock()
	_, _, r := in.recordAtLocked(key, pos)
	r.executions++
}

func (in *inspector) stats(key string) KeyStats {
	in.mu.Lock()
	defer in.mu.Unlock()
	counted := countedKey(key)
	h := strHash(counted)
	for _, t := range []*keyTable{&in.cur, &in.old} {
		if i, ok, _ := t.find(h, counted); ok {
			return t.stats(i)
		}
	}
	return KeyStats{Key: key, History: []Attempt{}}
}

// all returns the stats of every key kept, in the order first seen.
func (in *inspector) all() []KeyStats {
	in.mu.Lock()
	defer in.mu.Unlock()
	type kept struct {
		t *keyTable
		i int32
	}
	keys := make([]kept, 0, in.cur.recs.len()+in.old.recs.len())
	for _, t := range []*keyTable{&in.old, &in.cur} {
		for i := range t.recs.len() {
			if !t.recs.at(i).moved {
				keys = append(keys, kept{t, i})
			}
		}
	}
	slices.SortFunc(keys, func(a, b kept) int { return cmp.Compare(a.t.recs.at(a.i).seen, b.t.recs.at(b.i).seen) })
	out := make([]KeyStats, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.t.stats(k.i))
	}
	return out
}

func (in *inspector) reset() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.cur, in.old = keyTable{}, keyTable{}
	in.turn = 0
}

// Executions reports how many times the payment handler ran for key. It is
// safe for concurrent use.
func (s *Server) Executions(key string) int { return s.insp.stats(key).Executions }

// Attempts reports how many requests to POST /payments carried key,
// whatever their answer. It is safe for concurrent use.
func (s *Server) Attempts(key string) int { return s.insp.stats(key).Attempts }

// Stats reports everything recorded for key; a key never seen has zero
// counts. Its Payments is 0 when the ledger cannot be read (the failure is
// logged; GET /_mock/keys/{key} answers 503 then). It is safe for
// concurrent use.
func (s *Server) Stats(key string) KeyStats {
	ks, err := s.stats(context.Background(), key)
	if err != nil {
		s.log(context.Background(), "mockserver: reading the ledger failed", "error", err)
	}
	return ks
}

// stats is Stats, with the error of a ledger that cannot be read; the
// KeyStats then has every count but Payments.
func (s *Server) stats(ctx context.Context, key string) (KeyStats, error) {
	ks := s.insp.stats(key)
	byKey, err := s.paymentsByKey(ctx)
	ks.Payments = byKey[key]
	return ks, err
}

// Keys reports the stats of every key this server saw and keeps (at most
// MaxInspectedKeys, the least recently used forgotten), in the order first
// seen. Their Payments are 0 when the ledger cannot be read (the failure
// is logged; GET /_mock/keys answers 503 then). It is safe for concurrent
// use.
func (s *Server) Keys() []KeyStats {
	all, err := s.keys(context.Background())
	if err != nil {
		s.log(context.Background(), "mockserver: reading the ledger failed", "error", err)
	}
	return all
}

// keys is Keys, with the error of a ledger that cannot be read.
func (s *Server) keys(ctx context.Context) ([]KeyStats, error) {
	all := s.insp.all()
	byKey, err := s.paymentsByKey(ctx)
	for i := range all {
		all[i].Payments = byKey[all[i].Key]
	}
	return all, err
}

// paymentsByKey counts the ledger's payments per idempotency key.
func (s *Server) paymentsByKey(ctx context.Context) (map[string]int, error) {
	ctx, cancel := s.ledgerContext(ctx)
	defer cancel()
	ps, err := s.ledger.Payments(ctx)
	if err != nil {
		return nil, err
	}
	byKey := map[string]int{}
	for _, p := range ps {
		byKey[p.IdempotencyKey]++
	}
	return byKey, nil
}

// Payments returns every payment in the server's ledger, oldest first (with
// a shared ledger, those of every server sharing it), or nil when the ledger
// cannot be read. It is safe for concurrent use.
func (s *Server) Payments() []Payment {
	ctx, cancel := s.ledgerContext(context.Background())
	defer cancel()
	ps, err := s.ledger.Payments(ctx)
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
	ctx, cancel := s.ledgerContext(context.Background())
	defer cancel()
	b, err := s.ledger.Balance(ctx, upper(currency))
	if err != nil {
		s.log(context.Background(), "mockserver: reading the ledger failed", "error", err)
		return 0
	}
	return b
}

// Reset brings the server back to its initial state: no payments, initial
// balances, no recorded attempts, no pending faults, and every key expired
// (see ExpireKeys). A ledger that cannot be reset keeps its payments: the
// failure is logged (POST /_mock/reset answers 503), the rest is reset all
// the same, and calling Reset again is safe. It is safe for concurrent use;
// requests running during Reset may be recorded on either side of it.
func (s *Server) Reset() {
	if err := s.reset(context.Background()); err != nil {
		s.log(context.Background(), "mockserver: resetting the ledger failed", "error", err)
	}
}

// reset is Reset, with the error of a ledger that could not be reset.
func (s *Server) reset(ctx context.Context) error {
	s.faults.clear()
	s.ExpireKeys()
	ctx, cancel := s.ledgerContext(ctx)
	defer cancel()
	err := s.ledger.Reset(ctx)
	s.insp.reset()
	return err
}

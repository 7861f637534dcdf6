package storetest_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/storetest"
	"github.com/saferetry/saferetry/internal/testkit"
)

// envMutant names the bug of the mutant store TestMutantStoreChild runs the
// suite on; unset, that test skips.
const envMutant = "SAFERETRY_STORETEST_MUTANT"

// bug is one rule of the Store contract that a mutant store breaks.
type bug string

// The bugs, each a mistake a store author could plausibly make.
const (
	none bug = ""
	// lapsedRefused refuses Complete and Release once the lease lapsed,
	// although nobody took the claim over.
	lapsedRefused bug = "lapsedRefused"
	// leaseUnits reports ClaimResult.LeaseRemaining in the wrong unit (a
	// count of microseconds read as nanoseconds).
	leaseUnits bug = "leaseUnits"
	// renewSetsExpiry sets the entry's expiry to the end of the new lease
	// (PEXPIRE key lease), also when that cuts the claim's ttl short.
	renewSetsExpiry bug = "renewSetsExpiry"
	// takeoverKeepsTTL leaves the expiry of the claim it took over as it
	// was, instead of keeping the entry for ttl from the takeover.
	takeoverKeepsTTL bug = "takeoverKeepsTTL"
	// completeTTLFromClaim counts Complete's ttl from when the entry was
	// claimed instead of from now.
	completeTTLFromClaim bug = "completeTTLFromClaim"
	// renewAnyLease accepts a lease of zero or less in Renew.
	renewAnyLease bug = "renewAnyLease"
	// mutatesResp sanitizes header values in the caller's own Response
	// (NUL and invalid UTF-8 out) before keeping it.
	mutatesResp bug = "mutatesResp"
	// unitSeparator keeps a header's values joined with the ASCII unit
	// separator and splits them on read.
	unitSeparator bug = "unitSeparator"
	// cancelledClaimApplies claims, then reports the cancelled context.
	cancelledClaimApplies bug = "cancelledClaimApplies"
	// staleRenewExtends sets the lease before it checks the token.
	staleRenewExtends bug = "staleRenewExtends"
	// hashSeparator keys its entries by scope, '#' and key joined.
	hashSeparator bug = "hashSeparator"
	// truncatedLease counts leases in whole microseconds, rounded down, so
	// that a lease under one is a claim lapsed at birth, and reports what
	// is left of a new claim by its clock (as a database's statement does).
	truncatedLease bug = "truncatedLease"
	// txKeepsClaimTTL is a TxStore whose Tx.Complete keeps the ttl the
	// claim was made with (an UPDATE that sets the outcome and not the
	// expiry).
	txKeepsClaimTTL bug = "txKeepsClaimTTL"
	// tokensForgetExpired draws tokens from a counter per key that it
	// keeps across a Release but forgets with the entry when it expires
	// (a counter kept in the entry's own item, deleted with it), so that
	// the first claim after an expiry gets the expired claim's token again.
	tokensForgetExpired bug = "tokensForgetExpired"
	// getSharesValues gives Get's reader a copy of the Response and of its
	// Header map, but the stored header value slices themselves.
	getSharesValues bug = "getSharesValues"
	// cancelledRenewApplies renews, then reports the cancelled context.
	cancelledRenewApplies bug = "cancelledRenewApplies"
	// completeCheckThenSet checks the token, then writes (Complete's
	// outcome, Release's deletion) with the lock let go for 5 ms in
	// between (1 ms escaped LateCompleteRacesTakeover's claims about one
	// run in ten, whose short pauses a loaded machine stretches) (a read, then an unconditional write), so that a takeover
	// in between is completed or released.
	completeCheckThenSet bug = "completeCheckThenSet"
)

// refStore is a small, plain, map-based Store written from the contract
// alone, with at most one bug switched on.
type refStore struct {
	bug    bug
	mu     sync.Mutex
	tokens int64
	m      map[idempotency.Key]*refEntry
	// counters are the tokens per key of tokensForgetExpired.
	counters map[idempotency.Key]int64
}

type refEntry struct {
	state      idempotency.State
	fp         string
	token      int64
	claimed    time.Time
	leaseUntil time.Time
	expiresAt  time.Time
	resp       *idempotency.Response
	joined     map[string]string // the header, joined (unitSeparator)
}

func newRefStore(b bug) *refStore {
	return &refStore{bug: b, m: make(map[idempotency.Key]*refEntry), counters: make(map[idempotency.Key]int64)}
}

var errRefDuration = errors.New("refstore: lease and ttl must be positive")

// mk is the map key of k.
func (s *refStore) mk(k idempotency.Key) idempotency.Key {
	if s.bug == hashSeparator {
		return idempotency.Key{Key: k.Scope + "#" + k.Key}
	}
	return k
}

// live returns k's unexpired entry at now; the lock must be held.
func (s *refStore) live(k idempotency.Key, now time.Time) *refEntry {
	e := s.m[s.mk(k)]
	if e != nil && !now.Before(e.expiresAt) {
		delete(s.m, s.mk(k))
		delete(s.counters, s.mk(k))
		return nil
	}
	return e
}

// next returns a new token for k; the lock must be held.
func (s *refStore) next(k idempotency.Key) int64 {
	if s.bug == tokensForgetExpired {
		s.counters[s.mk(k)]++
		return s.counters[s.mk(k)]
	}
	s.tokens++
	return s.tokens
}

func addDur(t time.Time, d time.Duration) time.Time {
	if u := t.Add(d); u.After(t) {
		return u
	}
	return t.Add(100 * 365 * 24 * time.Hour)
}

func (s *refStore) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	if err := ctx.Err(); err != nil && s.bug != cancelledClaimApplies {
		return idempotency.ClaimResult{}, err
	}
	if lease <= 0 || ttl <= 0 {
		return idempotency.ClaimResult{}, errRefDuration
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	e := s.live(k, now)
	left := lease
	if s.bug == leaseUnits {
		left = lease / 1000
	}
	if s.bug == truncatedLease {
		lease = lease.Truncate(time.Microsecond)
		if left = addDur(now, lease).Sub(time.Now()); left == 0 {
			left = -time.Nanosecond // lapsed, not "cannot tell"
		}
	}
	switch {
	case e == nil:
		tok := s.next(k)
		s.m[s.mk(k)] = &refEntry{state: idempotency.StateInProgress, fp: fp, token: tok, claimed: now,
			leaseUntil: addDur(now, lease), expiresAt: addDur(now, ttl)}
		return idempotency.ClaimResult{Acquired: true, Token: tok, LeaseRemaining: left}, ctx.Err()
	case e.state == idempotency.StateInProgress && e.fp == fp && !now.Before(e.leaseUntil):
		tok := s.next(k)
		e.token, e.claimed, e.leaseUntil = tok, now, addDur(now, lease)
		if s.bug != takeoverKeepsTTL {
			e.expiresAt = addDur(now, ttl)
		}
		return idempotency.ClaimResult{Acquired: true, Token: tok, TookOver: true, LeaseRemaining: left}, ctx.Err()
	}
	return idempotency.ClaimResult{Entry: s.export(e, now)}, ctx.Err()
}

func (s *refStore) export(e *refEntry, now time.Time) idempotency.Entry {
	out := idempotency.Entry{State: e.state, Fingerprint: e.fp, Token: e.token}
	if e.state == idempotency.StateInProgress {
		out.LeaseRemaining = e.leaseUntil.Sub(now)
	}
	if e.resp != nil {
		out.Response = copyResp(*e.resp)
		if e.joined != nil {
			out.Response.Header = http.Header{}
			for name, v := range e.joined {
				if v == "\x00nil" {
					out.Response.Header[name] = nil
					continue
				}
				out.Response.Header[name] = strings.Split(v, "\x1f")
			}
		}
	}
	return out
}

func copyResp(r idempotency.Response) *idempotency.Response {
	out := r
	if r.Body != nil {
		out.Body = append([]byte{}, r.Body...)
	}
	if r.Header != nil {
		out.Header = make(http.Header, len(r.Header))
		for name, vv := range r.Header {
			if vv == nil {
				out.Header[name] = nil
				continue
			}
			out.Header[name] = append([]string{}, vv...)
		}
	}
	return &out
}

// held runs f on k's entry when token holds its claim; renew tells Renew
// from Complete and Release.
func (s *refStore) held(k idempotency.Key, token int64, renew bool, f func(e *refEntry, now time.Time)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	e := s.live(k, now)
	if e == nil || e.state != idempotency.StateInProgress || e.token != token {
		return idempotency.ErrStaleToken
	}
	if s.bug == lapsedRefused && !renew && !now.Before(e.leaseUntil) {
		return idempotency.ErrStaleToken
	}
	if s.bug == completeCheckThenSet && !renew {
		s.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		s.mu.Lock()
		now = time.Now()
	}
	f(e, now)
	return nil
}

func (s *refStore) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	if err := ctx.Err(); err != nil && s.bug != cancelledRenewApplies {
		return err
	}
	if lease <= 0 && s.bug != renewAnyLease {
		return errRefDuration
	}
	if s.bug == staleRenewExtends {
		s.mu.Lock()
		if e := s.live(k, time.Now()); e != nil && e.state == idempotency.StateInProgress {
			e.leaseUntil = addDur(time.Now(), lease)
		}
		s.mu.Unlock()
	}
	err := s.held(k, token, true, func(e *refEntry, now time.Time) {
		e.leaseUntil = addDur(now, lease)
		switch {
		case s.bug == renewSetsExpiry:
			e.expiresAt = e.leaseUntil
		case e.expiresAt.Before(e.leaseUntil):
			e.expiresAt = e.leaseUntil
		}
	})
	if err == nil {
		err = ctx.Err()
	}
	return err
}

func (s *refStore) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ttl <= 0 {
		return errRefDuration
	}
	if s.bug == mutatesResp {
		for _, vv := range resp.Header {
			for i, v := range vv {
				vv[i] = strings.ReplaceAll(strings.ToValidUTF8(v, "?"), "\x00", "")
			}
		}
	}
	return s.held(k, token, false, func(e *refEntry, now time.Time) {
		e.state, e.leaseUntil = idempotency.StateCompleted, time.Time{}
		e.expiresAt = addDur(now, ttl)
		if s.bug == completeTTLFromClaim {
			e.expiresAt = addDur(e.claimed, ttl)
		}
		e.resp = copyResp(resp)
		if s.bug == unitSeparator && resp.Header != nil {
			e.joined = make(map[string]string, len(resp.Header))
			for name, vv := range resp.Header {
				if vv == nil {
					e.joined[name] = "\x00nil"
					continue
				}
				e.joined[name] = strings.Join(vv, "\x1f")
			}
		}
	})
}

func (s *refStore) Release(ctx context.Context, k idempotency.Key, token int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.held(k, token, false, func(*refEntry, time.Time) { delete(s.m, s.mk(k)) })
}

func (s *refStore) Get(ctx context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	if err := ctx.Err(); err != nil {
		return idempotency.Entry{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	e := s.live(k, now)
	if e == nil {
		return idempotency.Entry{}, false, nil
	}
	out := s.export(e, now)
	if s.bug == getSharesValues && e.resp != nil && e.resp.Header != nil {
		out.Response.Header = make(http.Header, len(e.resp.Header))
		for name, vv := range e.resp.Header {
			out.Response.Header[name] = vv
		}
	}
	return out, true, nil
}

// refTxStore is refStore with transactions: a Tx holds a lock on each key
// it claims until it ends, and its claims and outcomes reach the store
// when it commits.
type refTxStore struct {
	*refStore
	locks sync.Map // idempotency.Key -> chan struct{} of one slot
}

// refTx is a transaction of a refTxStore.
type refTx struct {
	s       *refTxStore
	held    []chan struct{}
	pending map[idempotency.Key]*refEntry
	done    bool
}

type refTxKey struct{}

func (s *refTxStore) BeginTx(ctx context.Context) (idempotency.Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &refTx{s: s, pending: make(map[idempotency.Key]*refEntry)}, nil
}

func (tx *refTx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, refTxKey{}, tx)
}

func (tx *refTx) Claim(ctx context.Context, k idempotency.Key, fp string, ttl time.Duration) (idempotency.ClaimResult, error) {
	if ttl <= 0 {
		return idempotency.ClaimResult{}, errRefDuration
	}
	lock, _ := tx.s.locks.LoadOrStore(k, make(chan struct{}, 1))
	select {
	case lock.(chan struct{}) <- struct{}{}:
		tx.held = append(tx.held, lock.(chan struct{}))
	case <-time.After(5 * time.Second):
		return idempotency.ClaimResult{Entry: idempotency.Entry{State: idempotency.StateInProgress, Fingerprint: fp}}, nil
	case <-ctx.Done():
		return idempotency.ClaimResult{}, ctx.Err()
	}
	s := tx.s.refStore
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if e := s.live(k, now); e != nil && (e.state == idempotency.StateCompleted || e.fp != fp || now.Before(e.leaseUntil)) {
		return idempotency.ClaimResult{Entry: s.export(e, now)}, nil
	}
	s.tokens++
	tx.pending[k] = &refEntry{state: idempotency.StateInProgress, fp: fp, token: s.tokens, claimed: now,
		leaseUntil: now, expiresAt: addDur(now, ttl)}
	return idempotency.ClaimResult{Acquired: true, Token: s.tokens}, nil
}

func (tx *refTx) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	if ttl <= 0 {
		return errRefDuration
	}
	e := tx.pending[k]
	if e == nil || e.state != idempotency.StateInProgress || e.token != token {
		return idempotency.ErrStaleToken
	}
	e.state, e.resp = idempotency.StateCompleted, copyResp(resp)
	if tx.s.bug != txKeepsClaimTTL {
		e.expiresAt = addDur(time.Now(), ttl)
	}
	return nil
}

func (tx *refTx) Commit(ctx context.Context) error {
	if !tx.done {
		s := tx.s.refStore
		s.mu.Lock()
		for k, e := range tx.pending {
			s.m[s.mk(k)] = e
		}
		s.mu.Unlock()
	}
	return tx.Rollback(ctx)
}

func (tx *refTx) Rollback(context.Context) error {
	if !tx.done {
		tx.done = true
		for _, lock := range tx.held {
			<-lock
		}
	}
	return nil
}

// TestMutantStoreChild runs the suite on the store with the bug named by
// envMutant ("none" for the store without a bug). It is run only as a child
// process of the tests below.
func TestMutantStoreChild(t *testing.T) {
	name, ok := os.LookupEnv(envMutant)
	if !ok {
		t.Skip("run by the TestSuiteRejects tests only")
	}
	b := bug(name)
	if name == "none" {
		b = none
	}
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		if b == none || b == txKeepsClaimTTL {
			return &refTxStore{refStore: newRefStore(b)}
		}
		return newRefStore(b)
	})
}

// runMutant runs the conformance cases matched by pattern (all when "") on
// the store with bug b in a child process, and returns its output and
// whether it passed.
func runMutant(t *testing.T, b bug, pattern string) (string, bool) {
	t.Helper()
	name := string(b)
	if b == none {
		name = "none"
	}
	return testkit.RunChildTest(t, "^TestMutantStoreChild$/"+pattern, envMutant, name, 90*time.Second)
}

// wantRejected checks that every named conformance case fails on the store
// with bug b.
func wantRejected(t *testing.T, b bug, cases ...string) {
	t.Helper()
	out, ok := runMutant(t, b, "^("+strings.Join(cases, "|")+")$")
	if ok {
		t.Fatalf("the suite passed a store with bug %s (cases %v):\n%s", b, cases, out)
	}
	for _, c := range cases {
		if !strings.Contains(out, "--- FAIL: TestMutantStoreChild/"+c+" ") {
			t.Errorf("case %s did not fail on the store with bug %s:\n%s", c, b, out)
		}
	}
}

// TestRefStorePassesTheSuite: the store the mutants are made from, without
// a bug, passes the whole suite, so that a case failing on a mutant fails
// for its bug.
func TestRefStorePassesTheSuite(t *testing.T) {
	if out, ok := runMutant(t, none, ""); !ok {
		t.Fatalf("the suite failed the store without a bug:\n%s", out)
	}
}

// TestSuiteRejects runs the suite on each mutant, a store that breaks one
// rule of the contract, and wants the cases named for that rule to fail.
func TestSuiteRejects(t *testing.T) {
	for _, m := range []struct {
		name  string
		bug   bug
		cases []string
	}{
		// Complete and Release act while the token is current and the entry in
		// progress, whether or not its lease lapsed (Store: "Renew, Complete and
		// Release act only when the given token is the entry's current token and
		// the entry is still in progress").
		{"CompleteRefusedAfterLapse", lapsedRefused, []string{"CompleteAfterLapse"}},
		// ClaimResult.LeaseRemaining is the lease itself for a store that answers
		// at once; a Middleware given a thousandth of it never starts a handler.
		{"WrongClaimLeaseRemaining", leaseUnits, []string{"ClaimNewKey", "LeaseLapseTakeover"}},
		// Renew keeps the entry at least until the end of the new lease: it never
		// cuts the ttl short.
		{"RenewCuttingTheTTL", renewSetsExpiry, []string{"RenewExtendsLease"}},
		// A takeover is a claim: the entry is kept for ttl from it.
		{"TakeoverKeepingTheOldTTL", takeoverKeepsTTL, []string{"TakeoverRestartsTTL"}},
		// Complete keeps the entry for ttl from now, not from the claim.
		{"CompleteTTLFromTheClaim", completeTTLFromClaim, []string{"CompleteCountsTTLFromNow"}},
		// A lease of zero or less is refused with an error, Renew's too.
		{"RenewWithNonPositiveLease", renewAnyLease, []string{"NonPositiveDurationsRefused"}},
		// A lease below a microsecond is refused or kept, never rounded down
		// to a claim lapsed at birth.
		{"LeaseTruncatedToZero", truncatedLease, []string{"TinyLeaseHeldOrRefused"}},
		// Complete must not modify resp; the suite must not compare what the store
		// gives back with what the store itself may have changed.
		{"CompleteModifyingTheResponse", mutatesResp, []string{"BytesKept"}},
		// Header values are kept byte for byte, whatever bytes they hold: the unit
		// separator too.
		{"HeaderValueSeparator", unitSeparator, []string{"BytesKept"}},
		// Two keys with different scopes never share an entry, whatever
		// punctuation joins scope and key.
		{"ScopeKeySeparator", hashSeparator, []string{"ScopeSeparation"}},
		// The store changes nothing when it returns ErrStaleToken: a stale Renew
		// leaves the holder's lease as it was.
		{"StaleRenewChangingTheLease", staleRenewExtends, []string{"StaleTokenRefused"}},
		// A Claim refused for its cancelled context reserves nothing.
		{"CancelledClaimApplied", cancelledClaimApplies, []string{"ContextCancelled"}},
		// Tx.Complete keeps the entry for its own ttl from then on, like
		// Store.Complete.
		{"TxCompleteKeepingTheClaimTTL", txKeepsClaimTTL, []string{"TxCompleteSetsTTL"}},
		// A token is greater than every token issued before for the key,
		// also after the key expired: the expired claim's holder, paused
		// past the ttl, may still Complete or Release, and must be fenced.
		{"TokensRestartAfterExpiry", tokensForgetExpired, []string{"TTLExpiryInProgress", "TTLExpiryCompleted"}},
		// Get's Response is the caller's to modify, its header values too:
		// a reader that changes one changes no later replay.
		{"GetSharingHeaderValues", getSharesValues, []string{"ResponseCopied"}},
		// A Renew refused for its cancelled context changes nothing: the
		// holder's lease stays as it was.
		{"CancelledRenewApplied", cancelledRenewApplies, []string{"ContextCancelled"}},
		// Complete acts only while the token is current: a takeover that
		// comes between its check and its write is not completed.
		{"CompleteCheckThenSet", completeCheckThenSet, []string{"LateCompleteRacesTakeover"}},
	} {
		t.Run(m.name, func(t *testing.T) { wantRejected(t, m.bug, m.cases...) })
	}
}

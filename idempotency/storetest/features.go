package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// Feature is an optional capability of a store, beyond idempotency.Store.
// Run checks a feature's contract whenever a store has it; declaring it
// also makes Run fail when a store lacks it, so that a store that lost the
// capability (a wrapper that hides it, a refactoring) is caught. It is a
// plain string value, safe to share.
type Feature string

// The optional features.
const (
	// Transactional is idempotency.TxStore: claim, the handler's writes
	// and the outcome in one transaction.
	Transactional Feature = "transactional"
	// Watching is idempotency.Watcher: waiting requests woken when an
	// entry settles.
	Watching Feature = "watching"
)

// featureCases are the cases of the optional features, by feature.
var featureCases = map[Feature][]struct {
	name string
	fn   func(t *testing.T, s idempotency.Store)
}{
	Transactional: {
		{"TxCommitStoresTheOutcome", testTxCommit},
		{"TxRollbackFreesTheKey", testTxRollback},
		{"TxConcurrentClaimNeverAcquires", testTxConcurrentClaim},
		{"TxStaleTokenRefused", testTxStaleToken},
		{"TxCompleteSetsTTL", testTxCompleteTTL},
		{"TxClaimHeldPastItsTTL", testTxClaimHeldPastTTL},
		{"TxContextKeepsValues", testTxContext},
	},
	Watching: {
		{"WatchWakesOnComplete", func(t *testing.T, s idempotency.Store) { testWatch(t, s, true) }},
		{"WatchWakesOnRelease", func(t *testing.T, s idempotency.Store) { testWatch(t, s, false) }},
	},
}

// has reports whether s has feature f.
func has(s idempotency.Store, f Feature) bool {
	switch f {
	case Transactional:
		_, ok := s.(idempotency.TxStore)
		return ok
	case Watching:
		_, ok := s.(idempotency.Watcher)
		return ok
	}
	return false
}

func begin(t *testing.T, s idempotency.Store) idempotency.Tx {
	t.Helper()
	tx, err := s.(idempotency.TxStore).BeginTx(ctxT(t))
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

func txAcquire(t *testing.T, tx idempotency.Tx, k idempotency.Key, fp string) int64 {
	t.Helper()
	r, err := tx.Claim(ctxT(t), k, fp, longTTL)
	if err != nil || !r.Acquired {
		t.Fatalf("Tx.Claim(%q) = %+v, %v; want acquired", k.Key, r, err)
	}
	return r.Token
}

// txCompleted begins a transaction on s, and claims and completes in it,
// with sample(), the key of t with suffix: the outcome that the
// transaction's Commit or Rollback then keeps or drops. It returns the key,
// the transaction and the claim's token.
func txCompleted(t *testing.T, s idempotency.Store, suffix string) (idempotency.Key, idempotency.Tx, int64) {
	t.Helper()
	k := key(t, suffix)
	tx := begin(t, s)
	tok := txAcquire(t, tx, k, "fp")
	if err := tx.Complete(ctxT(t), k, tok, sample(), longTTL); err != nil {
		t.Fatalf("Tx.Complete: %v", err)
	}
	return k, tx, tok
}

func testTxCommit(t *testing.T, s idempotency.Store) {
	k, tx, tok := txCompleted(t, s, "tx-commit")
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Errorf("Rollback after Commit = %v, want nil", err)
	}
	e, found := mustGet(t, s, k)
	if !found || e.State != idempotency.StateCompleted || e.Token != tok {
		t.Fatalf("Get after Commit = %+v, %v; want completed with token %d", e, found, tok)
	}
	if d := diffResponse(e.Response, sample()); d != "" {
		t.Errorf("stored response: %s", d)
	}
	r, err := begin(t, s).Claim(ctxT(t), k, "fp", longTTL)
	if err != nil || r.Acquired || r.Entry.State != idempotency.StateCompleted {
		t.Errorf("Tx.Claim of a committed key = %+v, %v; want the completed entry", r, err)
	}
}

func testTxRollback(t *testing.T, s idempotency.Store) {
	k, tx, _ := txCompleted(t, s, "tx-rollback")
	if err := tx.Rollback(ctxT(t)); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if e, found := mustGet(t, s, k); found {
		t.Fatalf("Get after Rollback = %+v; want nothing", e)
	}
	txAcquire(t, begin(t, s), k, "fp")
}

// testTxConcurrentClaim: while a transaction holds an uncommitted claim, a
// claim in another transaction never acquires the key: it waits, then sees
// the committed outcome, or reports the key in progress when its wait ends.
func testTxConcurrentClaim(t *testing.T, s idempotency.Store) {
	k := key(t, "tx-concurrent")
	tx1 := begin(t, s)
	tok := txAcquire(t, tx1, k, "fp")
	got := make(chan idempotency.ClaimResult, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tx2, err := s.(idempotency.TxStore).BeginTx(ctxT(t))
		if err != nil {
			t.Errorf("BeginTx: %v", err)
			return
		}
		defer tx2.Rollback(context.Background())
		r, err := tx2.Claim(ctxT(t), k, "fp", longTTL)
		if err != nil {
			t.Errorf("concurrent Tx.Claim: %v", err)
			return
		}
		got <- r
	}()
	pause(100 * time.Millisecond) // the second claim is under way, or done
	if err := tx1.Complete(ctxT(t), k, tok, sample(), longTTL); err != nil {
		t.Fatal(err)
	}
	if err := tx1.Commit(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	select {
	case r := <-got:
		if r.Acquired {
			t.Fatalf("a concurrent transaction acquired a key another one held: %+v", r)
		}
		if r.Entry.State != idempotency.StateCompleted && r.Entry.State != idempotency.StateInProgress {
			t.Fatalf("concurrent claim saw %+v; want the committed outcome or the key in progress", r.Entry)
		}
	default: // reported through t.Errorf
	}
}

func testTxStaleToken(t *testing.T, s idempotency.Store) {
	k := key(t, "tx-stale")
	tx := begin(t, s)
	tok := txAcquire(t, tx, k, "fp")
	if err := tx.Complete(ctxT(t), k, tok+1, sample(), longTTL); !errors.Is(err, idempotency.ErrStaleToken) {
		t.Errorf("Tx.Complete with another token = %v, want ErrStaleToken", err)
	}
}

// testTxCompleteTTL: like Store.Complete, Tx.Complete keeps the entry for
// its own ttl from then on, not for the ttl its claim was made with.
func testTxCompleteTTL(t *testing.T, s idempotency.Store) {
	k := key(t, "tx-ttl")
	tx := begin(t, s)
	tok := txAcquire(t, tx, k, "fp")
	if err := tx.Complete(ctxT(t), k, tok, sample(), shortTTL); err != nil {
		t.Fatalf("Tx.Complete: %v", err)
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	eventually(t, "the entry completed in a transaction with a short ttl expires", func() bool {
		_, found := mustGet(t, s, k)
		return !found
	})
	txAcquire(t, begin(t, s), k, "fp-other")
}

// testTxClaimHeldPastTTL: a transaction holds its claim until it ends,
// so a handler slower than the claim's ttl still completes and commits,
// and its outcome is kept for the ttl of its Complete.
func testTxClaimHeldPastTTL(t *testing.T, s idempotency.Store) {
	k := key(t, "tx-past-ttl")
	tx := begin(t, s)
	r, err := tx.Claim(ctxT(t), k, "fp", shortTTL)
	if err != nil || !r.Acquired {
		t.Fatalf("Tx.Claim = %+v, %v; want acquired", r, err)
	}
	pause(2 * shortTTL) // the handler runs past the claim's ttl
	if err := tx.Complete(ctxT(t), k, r.Token, sample(), longTTL); err != nil {
		t.Fatalf("Tx.Complete after the claim's ttl: %v", err)
	}
	if err := tx.Commit(ctxT(t)); err != nil {
		t.Fatalf("Commit after the claim's ttl: %v", err)
	}
	if e, found := mustGet(t, s, k); !found || e.State != idempotency.StateCompleted || e.Token != r.Token {
		t.Fatalf("Get after the commit = %+v, %v; want completed with token %d", e, found, r.Token)
	}
}

func testTxContext(t *testing.T, s idempotency.Store) {
	type ctxKey struct{}
	parent := context.WithValue(ctxT(t), ctxKey{}, "v")
	if got := begin(t, s).Context(parent).Value(ctxKey{}); got != "v" {
		t.Errorf("Tx.Context lost the parent's values: got %v", got)
	}
}

// testWatch: a watcher of an entry is woken when it is completed (or
// released), and not by another entry's completion.
func testWatch(t *testing.T, s idempotency.Store, complete bool) {
	w := s.(idempotency.Watcher)
	k, other := key(t, "watched"), key(t, "other")
	tok := mustAcquire(t, s, k, "fp", longLease, longTTL)
	otherTok := mustAcquire(t, s, other, "fp", longLease, longTTL)
	ch, stop, err := w.Watch(ctxT(t), k)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	defer stop()
	if err := s.Complete(ctxT(t), other, otherTok, sample(), longTTL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
		t.Fatal("another entry's completion woke the watcher")
	case <-time.After(100 * time.Millisecond):
	}
	if complete {
		err = s.Complete(ctxT(t), k, tok, sample(), longTTL)
	} else {
		err = s.Release(ctxT(t), k, tok)
	}
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatal("the settlement did not wake the watcher")
	}
}

package otelidempotency_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/otelidempotency"
	"github.com/saferetry/saferetry/idempotency/storetest"
)

func op(name string) attribute.KeyValue { return attribute.String("saferetry.store.operation", name) }

// TestWrapStoreTimesEachCall: the Middleware's store calls are timed by
// operation and store name; a failed call carries error.type.
func TestWrapStoreTimesEachCall(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider))
	h := serve(in, newStore(t), app{})
	expect(t, post(h, "k1", body), 201) // claim, complete
	expect(t, post(h, "k1", body), 201) // claim (refused: the replay)
	expect(t, post(serve(in, brokenStore{Store: newStore(t), stale: true}, app{}), "k2", body), 409)

	got := m.collect(t)
	name := attribute.String("saferetry.store.name", "test")
	noErr := absent("error.type")
	for _, c := range []struct {
		attrs []attribute.KeyValue
		want  uint64
	}{
		{[]attribute.KeyValue{op("claim"), name, noErr}, 3},
		{[]attribute.KeyValue{op("complete"), name, noErr}, 1},
		{[]attribute.KeyValue{op("complete"), name, attribute.String("error.type", "stale_token")}, 1},
	} {
		if n := got.count(otelidempotency.MetricStoreDuration, c.attrs...); n != c.want {
			t.Errorf("store.duration count %v = %d, want %d; every attribute: %v", c.attrs, n, c.want, got.everyAttribute())
		}
	}
}

// TestWrapStoreErrorTypes: each failure is named by its cause.
func TestWrapStoreErrorTypes(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider))
	causes := []error{
		idempotency.ErrStaleToken,
		errors.Join(errors.New("too big"), idempotency.ErrResponseNotStorable),
		context.Canceled,
		context.DeadlineExceeded,
		errDown,
	}
	for _, err := range causes {
		s := in.WrapStore(releaseFails{Store: newStore(t), err: err}, "test")
		if got := s.Release(context.Background(), idempotency.Key{Key: "k"}, 1); !errors.Is(got, err) {
			t.Errorf("Release = %v, want the store's own %v", got, err)
		}
	}
	got := m.collect(t)
	for _, et := range []string{"stale_token", "not_storable", "canceled", "deadline_exceeded", "_OTHER"} {
		if n := got.count(otelidempotency.MetricStoreDuration, op("release"), attribute.String("error.type", et)); n != 1 {
			t.Errorf("release with error.type %s: %d, want 1", et, n)
		}
	}
}

type releaseFails struct {
	idempotency.Store
	err error
}

func (s releaseFails) Release(context.Context, idempotency.Key, int64) error { return s.err }

// plainStore hides every method of a Store but the Store's own.
type plainStore struct{ idempotency.Store }

// txOnly is a TxStore without a Watcher.
type txOnly struct{ idempotency.TxStore }

// fakeTxStore is a TxStore and a Watcher over a memstore, with
// transactions that do nothing of their own: enough to see which
// interfaces a wrapper keeps and that calls reach the store.
type fakeTxStore struct {
	idempotency.Store
	idempotency.Watcher
}

func (f fakeTxStore) BeginTx(context.Context) (idempotency.Tx, error) { return fakeTx{}, nil }

type fakeTx struct{}

type txMark struct{}

func (fakeTx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txMark{}, true)
}
func (fakeTx) Claim(context.Context, idempotency.Key, string, time.Duration) (idempotency.ClaimResult, error) {
	return idempotency.ClaimResult{Acquired: true, Token: 1}, nil
}
func (fakeTx) Complete(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
	return nil
}
func (fakeTx) Commit(context.Context) error   { return nil }
func (fakeTx) Rollback(context.Context) error { return nil }

// TestWrapStoreKeepsOptionalInterfaces: the wrapper is a Watcher exactly
// when the store is, a TxStore exactly when the store is, so the
// Middleware keeps its mode and its waiters' notifications; a
// transaction's calls are timed and its Context is the store's.
func TestWrapStoreKeepsOptionalInterfaces(t *testing.T) {
	ms := newStore(t)
	full := fakeTxStore{Store: ms, Watcher: ms}
	in := otelidempotency.New(otelidempotency.WithMeterProvider(newMeter(t).provider))
	for _, c := range []struct {
		name          string
		store         idempotency.Store
		watcher, txer bool
	}{
		{"plain", plainStore{ms}, false, false},
		{"watcher", ms, true, false},
		{"tx", txOnly{full}, false, true},
		{"tx and watcher", full, true, true},
	} {
		s := in.WrapStore(c.store, c.name)
		if _, ok := s.(idempotency.Watcher); ok != c.watcher {
			t.Errorf("%s: Watcher %v, want %v", c.name, ok, c.watcher)
		}
		if _, ok := s.(idempotency.TxStore); ok != c.txer {
			t.Errorf("%s: TxStore %v, want %v", c.name, ok, c.txer)
		}
	}

	m := newMeter(t)
	in = otelidempotency.New(otelidempotency.WithMeterProvider(m.provider))
	ts := in.WrapStore(full, "tx").(idempotency.TxStore)
	ctx := context.Background()
	tx, err := ts.BeginTx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tx.Context(ctx).Value(txMark{}) != true {
		t.Error("the wrapped Tx's Context is not the store's: its accessor would find no transaction")
	}
	if _, err := tx.Claim(ctx, idempotency.Key{Key: "k"}, "fp", time.Hour); err != nil {
		t.Fatal(err)
	}
	_ = tx.Complete(ctx, idempotency.Key{Key: "k"}, 1, idempotency.Response{Status: 201}, time.Hour)
	_ = tx.Commit(ctx)
	_ = tx.Rollback(ctx)
	got := m.collect(t)
	for _, o := range []string{"begin_tx", "claim", "complete", "commit", "rollback"} {
		if n := got.count(otelidempotency.MetricStoreDuration, op(o), attribute.String("saferetry.store.name", "tx")); n != 1 {
			t.Errorf("%s timed %d times, want 1", o, n)
		}
	}
}

// TestWrapStoreConformance: a wrapped memstore keeps the Store and Watcher
// contracts.
func TestWrapStoreConformance(t *testing.T) {
	in := otelidempotency.New(otelidempotency.WithMeterProvider(newMeter(t).provider))
	storetest.Run(t, func(t *testing.T) idempotency.Store { return in.WrapStore(newStore(t), "memory") },
		storetest.Watching)
}

// TestWrapStoreClaimDeclined: a Claim that declines the key
// (idempotency.ErrClaimDeclined, wrapped or not) answered; its call is
// named by that cause, claim_declined, not _OTHER, which stands for a
// store that could not answer.
func TestWrapStoreClaimDeclined(t *testing.T) {
	m := newMeter(t)
	in := otelidempotency.New(otelidempotency.WithMeterProvider(m.provider))
	s := in.WrapStore(claimDeclines{newStore(t)}, "test")
	if _, err := s.Claim(context.Background(), idempotency.Key{Key: "k"}, "fp", time.Minute, time.Hour); !errors.Is(err, idempotency.ErrClaimDeclined) {
		t.Fatalf("Claim = %v, want the store's ErrClaimDeclined", err)
	}
	got := m.collect(t)
	if n := got.count(otelidempotency.MetricStoreDuration, op("claim"), attribute.String("error.type", "claim_declined")); n != 1 {
		t.Errorf("claim with error.type claim_declined: %d, want 1; every attribute: %v", n, got.everyAttribute())
	}
}

type claimDeclines struct{ idempotency.Store }

func (claimDeclines) Claim(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
	return idempotency.ClaimResult{}, fmt.Errorf("not this one: %w", idempotency.ErrClaimDeclined)
}

package memstore

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// keysInShard returns n keys with the given prefix that land in the shard
// of idempotency.Key{Key: prefix}.
func keysInShard(s *Store, prefix string, n int) []idempotency.Key {
	target := s.shardFor(idempotency.Key{Key: prefix})
	var keys []idempotency.Key
	for i := 0; len(keys) < n; i++ {
		if k := (idempotency.Key{Key: prefix + strconv.Itoa(i)}); s.shardFor(k) == target {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestFullClaimSweepsPastRequeuedExpiries: a Claim that finds the store
// full must sweep the entries already expired before it fails with
// ErrFull (doc.go, ErrFull). Here the only expired entry sits in its
// shard's queue behind more than one batch of expiries that are due but
// belong to live records (claimed with a ttl, completed with a longer one:
// the middleware's ordinary pattern), so one batch per shard reaches no
// expired entry.
func TestFullClaimSweepsPastRequeuedExpiries(t *testing.T) {
	ctx := context.Background()
	const kept = sweepBatch + 44
	s, clk := newFake(t, WithMaxEntries(kept+1))
	keys := keysInShard(s, "k", kept+1)
	for _, k := range keys[:kept] {
		r, err := s.Claim(ctx, k, "fp", time.Second, time.Hour)
		if err != nil || !r.Acquired {
			t.Fatalf("Claim(%v) = %+v, %v", k, r, err)
		}
		if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201}, 2*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	gone := keys[kept]
	if _, err := s.Claim(ctx, gone, "fp", time.Second, time.Hour); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour) // gone expires; the others live on
	r, err := s.Claim(ctx, idempotency.Key{Key: "new"}, "fp", time.Second, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatalf("Claim of a new key with an expired entry in the store = %+v, %v; want acquired", r, err)
	}
	checkBudget(t, s)
}

// TestFullCompleteSweepsPastStaleExpiries: likewise for a Complete whose
// response fits only once an expired record is gone (Store.Complete: "even
// after sweeping the expired entries"). Ahead of that record in its shard's
// queue are more than one batch of expiries of released claims, which give
// back a few dozen bytes each.
func TestFullCompleteSweepsPastStaleExpiries(t *testing.T) {
	ctx := context.Background()
	body := bytes.Repeat([]byte("x"), 64<<10)
	var held idempotency.Key
	var token int64
	setup := func(s *Store) {
		t.Helper()
		keys := keysInShard(s, "k", sweepBatch+45)
		for _, k := range keys[:sweepBatch+44] {
			r, err := s.Claim(ctx, k, "fp", time.Second, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Release(ctx, k, r.Token); err != nil {
				t.Fatal(err)
			}
		}
		old := keys[len(keys)-1]
		r, err := s.Claim(ctx, old, "fp", time.Second, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, old, r.Token, idempotency.Response{Status: 201, Body: body}, time.Hour); err != nil {
			t.Fatal(err)
		}
		held = idempotency.Key{Key: "held"}
		if r, err = s.Claim(ctx, held, "fp", time.Second, 2*time.Hour); err != nil {
			t.Fatal(err)
		}
		token = r.Token
	}
	// Measure what the setup holds, then bound a second store to it and a
	// little more: too little for a second large body while the first is
	// stored.
	probe, _ := newFake(t)
	setup(probe)
	_, used := probe.usage()
	s, clk := newFake(t, WithMaxBytes(used+4096))
	setup(s)
	clk.Advance(time.Hour) // the large record expires
	if err := s.Complete(ctx, held, token, idempotency.Response{Status: 201, Body: body}, time.Hour); err != nil {
		t.Fatalf("Complete with an expired large record in the store = %v; want it stored", err)
	}
	checkBudget(t, s)
}

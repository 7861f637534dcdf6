package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

// TestReplayWhileRedisIsFull: under maxmemory-policy noeviction, a Redis
// full of other data refuses writes, and so new claims; a claim of a key
// already completed needs no write, and must be answered with its outcome
// on either replay path (the fast path's GET answers it; the claim script
// began with SET NX, which Redis refused with OOM before it read the
// entry).
func TestReplayWhileRedisIsFull(t *testing.T) {
	rdb := ownRedis(t, "--maxmemory-policy", "noeviction")
	ctx := context.Background()
	plain := redisstore.New(rdb, redisstore.WithoutReplayFastPath())
	fast := redisstore.New(rdb, redisstore.WithReplayFastPath())
	done, held := idempotency.Key{Key: "charge-1"}, idempotency.Key{Key: "charge-2"}
	r, err := plain.Claim(ctx, done, "fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatalf("Claim = %+v, %v", r, err)
	}
	if err := plain.Complete(ctx, done, r.Token, idempotency.Response{Status: 201, Body: []byte("paid")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if r, err := plain.Claim(ctx, held, "fp", time.Minute, time.Hour); err != nil || !r.Acquired {
		t.Fatalf("Claim = %+v, %v", r, err)
	}
	released := idempotency.Key{Key: "released"}
	future := strconv.FormatInt(time.Now().UnixMicro()+60e6, 10)
	writePrevious(t, rdb, redisstore.DefaultPrefix, released, "st", "r", "tok", future)
	fillPastMaxmemory(t, rdb)
	if r, err := plain.Claim(ctx, released, "fp", time.Minute, time.Hour); err == nil {
		t.Errorf("a claim of a released key while Redis is full = %+v; want it refused", r)
	}
	for _, s := range []struct {
		name  string
		store *redisstore.Store
	}{{"without", plain}, {"with", fast}} {
		r, err := s.store.Claim(ctx, done, "fp", time.Minute, time.Hour)
		if err != nil || r.Acquired || r.Entry.State != idempotency.StateCompleted || r.Entry.Response == nil || string(r.Entry.Response.Body) != "paid" {
			t.Errorf("%s the fast path: Claim of a completed key while Redis is full = %+v, %v; want its outcome", s.name, r, err)
		}
		r, err = s.store.Claim(ctx, held, "other", time.Minute, time.Hour)
		if err != nil || r.Acquired || r.Entry.State != idempotency.StateInProgress {
			t.Errorf("%s the fast path: Claim of a key in progress while Redis is full = %+v, %v; want it in progress", s.name, r, err)
		}
		if r, err := s.store.Claim(ctx, idempotency.Key{Key: "new-" + s.name}, "fp", time.Minute, time.Hour); err == nil {
			t.Errorf("%s the fast path: a new claim while Redis is full = %+v; want it refused", s.name, r)
		}
	}
	// A claim that must write is refused before it writes anything: a
	// released hash entry of an earlier version keeps its token (here one
	// from a clock ahead), which the claim after the refusal must exceed.
	name := entryName(redisstore.DefaultPrefix, released.Key)
	if typ := rdb.Type(ctx, name).Val(); typ != "hash" {
		t.Fatalf("the released hash entry is a %q after a refused claim, want it kept", typ)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if r, err := plain.Claim(ctx, released, "fp", time.Minute, time.Hour); err != nil || !r.Acquired || strconv.FormatInt(r.Token, 10) <= future {
		t.Errorf("Claim of the released key once Redis has room = %+v, %v; want acquired with a token over %s", r, err, future)
	}
}

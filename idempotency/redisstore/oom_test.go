package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

// ownRedis starts a Redis of the test's own, which keeps nothing on disk,
// with args, and returns a client of it.
func ownRedis(t *testing.T, args ...string) *redis.Client {
	t.Helper()
	addr := startRedis(t, false, append([]string{"--save", "", "--appendonly", "no"}, args...)...)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// fillPastMaxmemory writes 2 MiB of other data, then lowers maxmemory
// below what Redis uses, as when other data grows past the limit: under
// noeviction Redis refuses writes until memory is freed.
func fillPastMaxmemory(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	val := strings.Repeat("x", 64<<10)
	for i := range 32 {
		if err := rdb.Set(ctx, fmt.Sprintf("other:%d", i), val, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			used, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used-(512<<10), 10)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "probe", "x", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("Redis is not out of memory: SET = %v", err)
	}
}

// TestHeldClaimsSettleWhileRedisIsFull: under maxmemory-policy noeviction,
// Redis filling up while handlers run (other data, a burst of claims) must
// not keep those handlers from settling their claims: renewals, the
// completion with the answer and a release go through, while new claims
// are refused. The settling scripts were refused with OOM before: the key
// stayed in progress, its lease lapsed, and the retry ran the handler
// again. Found by a review helper.
func TestHeldClaimsSettleWhileRedisIsFull(t *testing.T) {
	rdb := ownRedis(t, "--maxmemory-policy", "noeviction")
	ctx := context.Background()
	s := redisstore.New(rdb)
	claim := func(k idempotency.Key) int64 {
		t.Helper()
		r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
		if err != nil || !r.Acquired {
			t.Fatalf("Claim %q = %+v, %v", k.Key, r, err)
		}
		return r.Token
	}
	done, dropped := idempotency.Key{Key: "charge-1"}, idempotency.Key{Key: "charge-2"}
	tokDone, tokDropped := claim(done), claim(dropped)

	fillPastMaxmemory(t, rdb)

	if err := s.Renew(ctx, done, tokDone, time.Minute); err != nil {
		t.Errorf("Renew while Redis is full: %v", err)
	}
	if err := s.Complete(ctx, done, tokDone, idempotency.Response{Status: 201, Body: []byte(`{"charged":true}`)}, time.Hour); err != nil {
		t.Errorf("Complete while Redis is full: %v", err)
	}
	if err := s.Release(ctx, dropped, tokDropped); err != nil {
		t.Errorf("Release while Redis is full: %v", err)
	}
	if r, err := s.Claim(ctx, idempotency.Key{Key: "charge-3"}, "fp", time.Minute, time.Hour); err == nil {
		t.Errorf("a new claim while Redis is full = %+v; want it refused", r)
	}
	if e, found, err := s.Get(ctx, done); err != nil || !found || e.State != idempotency.StateCompleted || string(e.Response.Body) != `{"charged":true}` {
		t.Errorf("Get of the completed key = %+v, %v, %v; want its answer", e, found, err)
	}
	if _, found, err := s.Get(ctx, dropped); err != nil || found {
		t.Errorf("Get of the released key: found %v, %v; want it free", found, err)
	}
}

// TestAnswerOverBulkLimitNotStorable: an answer longer than Redis takes as
// one argument (proto-max-bulk-len, lowered here to its least, 1 MB) is
// refused with ErrResponseNotStorable, as the Store contract asks, and
// changes nothing, so that the Middleware records the operation as
// completed but not replayable. It came back as a plain protocol error,
// which the Middleware retried as a transient one until its store timeout,
// leaving the key in progress for the retry after the lease to run again.
// Found by a review helper.
func TestAnswerOverBulkLimitNotStorable(t *testing.T) {
	rdb := ownRedis(t, "--proto-max-bulk-len", "1mb")
	ctx := context.Background()
	s := redisstore.New(rdb)
	k := idempotency.Key{Key: "large"}
	r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatalf("Claim = %+v, %v", r, err)
	}
	large := idempotency.Response{Status: 200, Body: make([]byte, 3<<19)} // 1.5 MiB
	if err := s.Complete(ctx, k, r.Token, large, time.Hour); !errors.Is(err, idempotency.ErrResponseNotStorable) {
		t.Fatalf("Complete of 1.5 MiB = %v, want ErrResponseNotStorable", err)
	}
	if e, found, err := s.Get(ctx, k); err != nil || !found || e.State != idempotency.StateInProgress || e.Token != r.Token {
		t.Fatalf("after the refused Complete, Get = %+v, %v, %v; want the claim unchanged", e, found, err)
	}
	marker := idempotency.Response{Status: 200, Oversize: true}
	if err := s.Complete(ctx, k, r.Token, marker, time.Hour); err != nil {
		t.Fatalf("Complete of the oversize marker: %v", err)
	}
	if e, found, err := s.Get(ctx, k); err != nil || !found || e.State != idempotency.StateCompleted || e.Response == nil || !e.Response.Oversize {
		t.Errorf("Get = %+v, %v, %v; want completed, oversize", e, found, err)
	}
}

// failConfigOnce fails the first CONFIG command as a read timeout does,
// the caller's context still live.
type failConfigOnce struct{ done atomic.Bool }

func (*failConfigOnce) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *failConfigOnce) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "config" && f.done.CompareAndSwap(false, true) {
			err := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}
func (*failConfigOnce) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestBulkLimitReadAgainAfterABrokenRead: a CONFIG GET of the limit that
// fails on the connection (a read timeout) is not the server's answer, and
// is not kept for the Store's life as Redis's default of 512 MB: the next
// large answer reads the limit again and is refused before it is sent.
// Found by a review helper.
func TestBulkLimitReadAgainAfterABrokenRead(t *testing.T) {
	rdb := ownRedis(t, "--proto-max-bulk-len", "1mb")
	rdb.AddHook(&failConfigOnce{})
	ctx := context.Background()
	s := redisstore.New(rdb)
	large := idempotency.Response{Status: 200, Body: make([]byte, 8<<20)}
	for i := range 2 {
		k := idempotency.Key{Key: "large-" + strconv.Itoa(i)}
		r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
		if err != nil || !r.Acquired {
			t.Fatalf("Claim = %+v, %v", r, err)
		}
		err = s.Complete(ctx, k, r.Token, large, time.Hour)
		if i == 1 && !errors.Is(err, idempotency.ErrResponseNotStorable) {
			t.Errorf("Complete of 8 MiB after a broken read of the limit = %v, want ErrResponseNotStorable", err)
		}
	}
}

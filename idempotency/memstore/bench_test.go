package memstore_test

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
)

var benchResp = idempotency.Response{
	Status: http.StatusCreated,
	Header: http.Header{"Content-Type": {"application/json"}},
	Body:   []byte(`{"id":"op_123","amount":1000,"currency":"EUR","status":"succeeded","created":1700000000}`),
}

// BenchmarkClaimComplete measures a first execution's store work: one Claim
// and one Complete on a new key, from parallel goroutines.
func BenchmarkClaimComplete(b *testing.B) {
	s := memstore.New(memstore.WithMaxEntries(math.MaxInt), memstore.WithMaxBytes(math.MaxInt64)) // b.N new keys
	defer s.Close()
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := idempotency.Key{Scope: "bench", Key: strconv.FormatInt(n.Add(1), 36)}
			r, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Hour)
			if err != nil || !r.Acquired {
				b.Fatalf("Claim = %+v, %v", r, err)
			}
			if err := s.Complete(ctx, k, r.Token, benchResp, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReplay measures a replay's store work: one Claim that finds a
// completed entry and copies its response out.
func BenchmarkReplay(b *testing.B) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	const keys = 1024
	for i := range keys {
		k := idempotency.Key{Scope: "bench", Key: strconv.Itoa(i)}
		r, _ := s.Claim(ctx, k, "fp", 10*time.Second, time.Hour)
		if err := s.Complete(ctx, k, r.Token, benchResp, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := idempotency.Key{Scope: "bench", Key: strconv.Itoa(int(n.Add(1) % keys))}
			r, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Hour)
			if err != nil || r.Acquired || r.Entry.Response == nil {
				b.Fatalf("Claim = %+v, %v", r, err)
			}
		}
	})
}

// BenchmarkMiddlewareParallel measures first executions through the
// middleware over the memory store from GOMAXPROCS goroutines at once; the
// Redis and PostgreSQL stores have benchmarks of the same name, so one run
// over ./idempotency/... compares them side by side.
func BenchmarkMiddlewareParallel(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		s := memstore.New(memstore.WithMaxEntries(math.MaxInt), memstore.WithMaxBytes(math.MaxInt64))
		defer s.Close()
		scenario.ParallelFirstExecutions(b, s)
	})
}

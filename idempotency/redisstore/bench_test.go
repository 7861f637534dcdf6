package redisstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
)

// countedStore returns a store whose client counts its round trips, with the
// server's script cache warmed so that EVALSHA hits.
func countedStore(tb testing.TB) (*redisstore.Store, *roundTrips) {
	tb.Helper()
	s, rdb, _ := newStore(tb)
	ctx := context.Background()
	k := idempotency.Key{Scope: "warm", Key: "up"}
	res, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	_ = s.Renew(ctx, k, res.Token, time.Minute)
	_ = s.Complete(ctx, k, res.Token, idempotency.Response{Status: 200}, time.Hour)
	_, _, _ = s.Get(ctx, k)
	res, _ = s.Claim(ctx, idempotency.Key{Scope: "warm", Key: "release"}, "fp", time.Minute, time.Hour)
	_ = s.Release(ctx, idempotency.Key{Scope: "warm", Key: "release"}, res.Token)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	return s, rt
}

func reportRoundTrips(b *testing.B, rt *roundTrips) {
	b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
}

var benchResp = idempotency.Response{
	Status: 201,
	Header: http.Header{"Content-Type": {"application/json"}},
	Body:   []byte(`{"id":"pay_123","amount":1000,"currency":"EUR","status":"succeeded"}`),
}

// BenchmarkStore measures the store calls the middleware makes: a first
// execution (Claim then Complete) and a replay (Get, or Claim finding the
// completed entry).
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	b.Run("claim+complete", func(b *testing.B) {
		s, rt := countedStore(b)
		rt.n.Store(0)
		b.ResetTimer()
		for i := range b.N {
			k := idempotency.Key{Scope: "bench", Key: strconv.Itoa(i)}
			res, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Minute)
			if err != nil || !res.Acquired {
				b.Fatalf("Claim: %+v %v", res, err)
			}
			if err := s.Complete(ctx, k, res.Token, benchResp, time.Minute); err != nil {
				b.Fatal(err)
			}
		}
		reportRoundTrips(b, rt)
	})
	replay := func(b *testing.B, op func(*redisstore.Store, idempotency.Key) error) {
		s, rt := countedStore(b)
		k := idempotency.Key{Scope: "bench", Key: "done"}
		res, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Complete(ctx, k, res.Token, benchResp, time.Minute); err != nil {
			b.Fatal(err)
		}
		rt.n.Store(0)
		b.ResetTimer()
		for range b.N {
			if err := op(s, k); err != nil {
				b.Fatal(err)
			}
		}
		reportRoundTrips(b, rt)
	}
	b.Run("replay-get", func(b *testing.B) {
		replay(b, func(s *redisstore.Store, k idempotency.Key) error {
			e, found, err := s.Get(ctx, k)
			if err == nil && (!found || e.Response == nil) {
				b.Fatalf("Get: %+v %v", e, found)
			}
			return err
		})
	})
	b.Run("replay-claim", func(b *testing.B) {
		replay(b, func(s *redisstore.Store, k idempotency.Key) error {
			res, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Minute)
			if err == nil && (res.Acquired || res.Entry.Response == nil) {
				b.Fatalf("Claim on completed: %+v", res)
			}
			return err
		})
	})
}

func benchRequest(key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1000,"currency":"EUR"}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(idempotency.HeaderIdempotencyKey, key)
	return r
}

func benchHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(benchResp.Body)
	})
}

// BenchmarkMiddleware measures one request through the middleware over
// Redis, without the HTTP transport: a first execution and a replay.
func BenchmarkMiddleware(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		s, rt := countedStore(b)
		h := idempotency.Middleware(s, idempotency.WithTTL(time.Minute))(benchHandler())
		rt.n.Store(0)
		b.ResetTimer()
		for i := range b.N {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, benchRequest("first-"+strconv.Itoa(i)))
			if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
				b.Fatalf("first execution answered %d %q", w.Code, w.Body)
			}
		}
		reportRoundTrips(b, rt)
	})
	b.Run("replay", func(b *testing.B) {
		s, rt := countedStore(b)
		h := idempotency.Middleware(s, idempotency.WithTTL(time.Minute))(benchHandler())
		h.ServeHTTP(httptest.NewRecorder(), benchRequest("replayed"))
		rt.n.Store(0)
		b.ResetTimer()
		for range b.N {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, benchRequest("replayed"))
			if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "true" {
				b.Fatalf("replay answered %d %q", w.Code, w.Body)
			}
		}
		reportRoundTrips(b, rt)
	})
}

// BenchmarkMiddlewareParallel measures first executions through the
// middleware from GOMAXPROCS goroutines at once, each request a new key.
func BenchmarkMiddlewareParallel(b *testing.B) {
	b.Run("redis", func(b *testing.B) {
		s, rt := countedStore(b)
		before := rt.n.Load()
		n := scenario.ParallelFirstExecutions(b, s, idempotency.WithTTL(time.Minute))
		b.ReportMetric(float64(rt.n.Load()-before)/float64(n), "roundtrips/op")
	})
}

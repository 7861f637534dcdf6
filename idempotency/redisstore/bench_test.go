package redisstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
	"github.com/saferetry/saferetry/internal/benchratio"
	"github.com/saferetry/saferetry/internal/headercodec"
)

// countedStore returns a store whose client counts its round trips, with the
// server's script cache warmed so that EVALSHA hits.
func countedStore(tb testing.TB) (*redisstore.Store, *roundTrips) {
	tb.Helper()
	s, rdb, _ := newStore(tb)
	warmScripts(tb, s)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	return s, rt
}

// warmScripts runs every store call once, so that the server's script
// cache holds every script and EVALSHA hits.
func warmScripts(tb testing.TB, s *redisstore.Store) {
	tb.Helper()
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

// ratioConcurrency are the numbers of goroutines BenchmarkStoreRatio
// runs each comparison at.
var ratioConcurrency = []int{1, 8, 32, 64}

// inParallel runs op(0) to op(n-1) from c goroutines at once.
func inParallel(n, c int, op func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(c, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				op(i)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkStoreRatio runs the store against the raw Redis commands of
// the same number of round trips, alternately in one process (see
// internal/benchratio), at 1, 8, 32 and 64 goroutines: a first execution
// (Claim then Complete, two EVALSHA) against SET NX then HSET of the same
// outcome, and a replay (Claim finding the completed entry, one EVALSHA)
// against HGETALL of a hash of the same outcome (the store's entries in the
// format of earlier versions); the -fastpath variants do the same
// with WithReplayFastPath. ratio is the store's time over the
// raw commands'; speed, its inverse, is the fraction of the raw throughput
// the store reaches.
//
//	go test -run '^$' -bench StoreRatio -benchtime 20000x ./idempotency/redisstore
func BenchmarkStoreRatio(b *testing.B) {
	ctx := context.Background()
	fp := benchFingerprint()
	hdr := headercodec.Append(nil, benchResp.Header)
	for _, c := range ratioConcurrency {
		for _, v := range ratioVariants {
			b.Run("first"+v.suffix+"/c="+strconv.Itoa(c), func(b *testing.B) {
				s, rdb, prefix := ratioStore(b, c, v.opts...)
				variant, anchor := firstOps(b, s, rdb, prefix, c)
				benchratio.Run(b, variant, anchor)
			})
			b.Run("replay"+v.suffix+"/c="+strconv.Itoa(c), func(b *testing.B) {
				s, rdb, prefix := ratioStore(b, c, v.opts...)
				keys := make([]idempotency.Key, c)
				names := make([]string, c)
				for i := range keys {
					keys[i] = idempotency.Key{Scope: "tenant", Key: "done-" + strconv.Itoa(i)}
					res, err := s.Claim(ctx, keys[i], fp, 10*time.Second, time.Minute)
					if err != nil {
						b.Fatal(err)
					}
					if err := s.Complete(ctx, keys[i], res.Token, benchResp, time.Minute); err != nil {
						b.Fatal(err)
					}
				}
				// The anchor reads a hash of the same outcome, as the
				// issue's raw limit does (HGETALL): the store's entries
				// are strings, which a GET would read for less.
				for i := range names {
					names[i] = prefix + "raw-done-" + strconv.Itoa(i)
					if err := rdb.HSet(ctx, names[i], "st", "c", "f", fp, "tok", "1", "code", "201", "hdr", hdr, "body", benchResp.Body).Err(); err != nil {
						b.Fatal(err)
					}
				}
				benchratio.Run(b, func(n int) {
					inParallel(n, c, func(i int) {
						res, err := s.Claim(ctx, keys[i%c], fp, 10*time.Second, time.Minute)
						if err != nil || res.Acquired || res.Entry.Response == nil {
							b.Errorf("Claim on completed: %+v %v", res, err)
						}
					})
				}, func(n int) {
					inParallel(n, c, func(i int) {
						if m, err := rdb.HGetAll(ctx, names[i%c]).Result(); err != nil || m["st"] != "c" {
							b.Errorf("HGETALL: %v %v", m, err)
						}
					})
				})
			})
		}
	}
}

// benchFingerprint is the fingerprint of the ratio benchmarks' requests.
func benchFingerprint() string {
	return idempotency.Fingerprint(benchRequest("k"), []byte(`{"amount":1000,"currency":"EUR"}`))
}

// firstOps returns the first-execution comparison of BenchmarkStoreRatio
// from c goroutines: the variant claims and completes new keys in s (two
// EVALSHA), the anchor sends SET NX then HSET of the same outcome through
// rdb, under prefix.
func firstOps(b *testing.B, s *redisstore.Store, rdb *redis.Client, prefix string, c int) (variant, anchor func(n int)) {
	ctx := context.Background()
	fp := benchFingerprint()
	hdr := headercodec.Append(nil, benchResp.Header)
	var vseq, aseq atomic.Int64
	variant = func(n int) {
		inParallel(n, c, func(int) {
			executeFirst(b, s, idempotency.Key{Scope: "tenant", Key: "first-" + strconv.FormatInt(vseq.Add(1), 10)}, fp)
		})
	}
	anchor = func(n int) {
		inParallel(n, c, func(int) {
			name := prefix + "raw:" + strconv.FormatInt(aseq.Add(1), 10)
			if err := rdb.SetNX(ctx, name, fp, time.Minute).Err(); err != nil {
				b.Error(err)
			}
			if err := rdb.HSet(ctx, name+":out", "code", "201", "hdr", hdr, "body", benchResp.Body).Err(); err != nil {
				b.Error(err)
			}
		})
	}
	return variant, anchor
}

// BenchmarkStoreCPU runs BenchmarkStoreRatio's first-execution comparison
// (the default store) in 8 alternating rounds (benchratio.RunTimed), and
// reports beside the times where the CPU goes: the Redis server's per
// operation (INFO cpu) and this process's (getrusage), for the store and,
// prefixed anchor-, for the raw commands, and server-ratio, the store's
// server CPU over the raw commands'. Where the server and the benchmark
// share a few cores, the time ratio follows what both spend per operation
// together, which these metrics take apart. The INFO calls around each
// round count in its CPU (two round trips and their parsing in thousands
// of operations), not in its time.
//
//	go test -run '^$' -bench StoreCPU -benchtime 64000x ./idempotency/redisstore
func BenchmarkStoreCPU(b *testing.B) {
	for _, c := range ratioConcurrency {
		b.Run("first/c="+strconv.Itoa(c), func(b *testing.B) {
			s, rdb, prefix := ratioStore(b, c)
			variant, anchor := firstOps(b, s, rdb, prefix, c)
			var vs, as cpuSplit
			benchratio.RunTimed(b, 8, vs.around(b, rdb, variant), as.around(b, rdb, anchor))
			vs.report(b, "")
			as.report(b, "anchor-")
			if as.server > 0 {
				b.ReportMetric(float64(vs.server)/float64(as.server), "server-ratio")
			}
		})
	}
}

// executeFirst claims k, a new key, in s with fingerprint fp and completes
// it, failing b (with Errorf: it runs on many goroutines) on an error.
func executeFirst(b *testing.B, s *redisstore.Store, k idempotency.Key, fp string) {
	ctx := context.Background()
	res, err := s.Claim(ctx, k, fp, 10*time.Second, time.Minute)
	if err != nil || !res.Acquired {
		b.Errorf("Claim: %+v %v", res, err)
		return
	}
	if err := s.Complete(ctx, k, res.Token, benchResp, time.Minute); err != nil {
		b.Error(err)
	}
}

// ratioVariants are the store configurations BenchmarkStoreRatio runs:
// the default (which reads first after a window of claims that were mostly
// replays: the replay rows are all replays), WithoutReplayFastPath (every
// claim the claim script) and WithReplayFastPath (a first execution one
// GET more, a replay a GET instead of the claim script).
var ratioVariants = []struct {
	suffix string
	opts   []redisstore.Option
}{
	{"", nil},
	{"-claim", []redisstore.Option{redisstore.WithoutReplayFastPath()}},
	{"-fastpath", []redisstore.Option{redisstore.WithReplayFastPath()}},
}

// BenchmarkReplayMix runs claims of which a given share are replays (the
// rest first executions: Claim and Complete of a new key) from 8
// goroutines, through a default store (which chooses its replay path from
// the mix) and through one with WithReplayFastPath, each against a store
// with WithoutReplayFastPath (every claim the claim script): a speed over
// 1 is what reading first saves at that share, under 1 what it costs.
//
//	go test -run '^$' -bench BenchmarkReplayMix -benchtime 12800x ./idempotency/redisstore/
func BenchmarkReplayMix(b *testing.B) {
	const c = 8
	ctx := context.Background()
	fp := idempotency.Fingerprint(benchRequest("k"), []byte(`{"amount":1000,"currency":"EUR"}`))
	for _, share := range []int64{0, 50, 75, 90, 100} {
		for _, v := range ratioVariants {
			if v.suffix == "-claim" {
				continue // the anchor
			}
			name := strings.TrimPrefix(v.suffix, "-")
			if name == "" {
				name = "adaptive"
			}
			b.Run(fmt.Sprintf("%s/replays=%d%%", name, share), func(b *testing.B) {
				s, _, _ := ratioStore(b, c, v.opts...)
				anchor, _, _ := ratioStore(b, c, redisstore.WithoutReplayFastPath())
				done := idempotency.Key{Scope: "tenant", Key: "done"}
				for _, st := range []*redisstore.Store{s, anchor} {
					res, err := st.Claim(ctx, done, fp, 10*time.Second, time.Minute)
					if err != nil || !res.Acquired {
						b.Fatal(res, err)
					}
					if err := st.Complete(ctx, done, res.Token, benchResp, time.Minute); err != nil {
						b.Fatal(err)
					}
				}
				var seq atomic.Int64
				mix := func(st *redisstore.Store) func(n int) {
					var next atomic.Int64
					return func(n int) {
						inParallel(n, c, func(int) {
							// The replays spread evenly: claim i is one when
							// the count of replays due by then goes up.
							if i := next.Add(1); i*share/100 > (i-1)*share/100 {
								if res, err := st.Claim(ctx, done, fp, 10*time.Second, time.Minute); err != nil || res.Acquired || res.Entry.Response == nil {
									b.Errorf("Claim on completed: %+v %v", res, err)
								}
								return
							}
							executeFirst(b, st, idempotency.Key{Scope: "tenant", Key: "mix-" + strconv.FormatInt(seq.Add(1), 10)}, fp)
						})
					}
				}
				benchratio.Run(b, mix(s), mix(anchor))
			})
		}
	}
}

// ratioStore returns a store whose client has a connection for each of c
// goroutines (and the gate's quarter on top), with the scripts loaded, and
// that client.
func ratioStore(b *testing.B, c int, opts ...redisstore.Option) (*redisstore.Store, *redis.Client, string) {
	o := redisOptions(b)
	o.PoolSize, o.MinIdleConns = 2*c, 2*c
	rdb := redis.NewClient(o)
	b.Cleanup(func() { rdb.Close() })
	prefix := newPrefix(b, rdb)
	s := redisstore.New(rdb, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, opts...)...)
	warmScripts(b, s)
	return s, rdb, prefix
}

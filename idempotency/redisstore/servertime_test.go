package redisstore_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/headercodec"
)

// commandStats reads INFO commandstats: calls and total microseconds per
// command, by the name Redis gives it ("evalsha", "hset", ...).
func commandStats(tb testing.TB, rdb *redis.Client) map[string][2]float64 {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatalf("INFO commandstats: %v", err)
	}
	stats := make(map[string][2]float64)
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var calls, usec float64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseFloat(v, 64)
			case "usec":
				usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		stats[strings.TrimPrefix(name, "cmdstat_")] = [2]float64{calls, usec}
	}
	return stats
}

// redisCPU reads INFO cpu: the CPU time the Redis server has used, system
// and user, main thread and all.
func redisCPU(tb testing.TB, rdb *redis.Client) time.Duration {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatalf("INFO cpu: %v", err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			s, _ := strconv.ParseFloat(v, 64)
			total += s
		}
	}
	return time.Duration(total * float64(time.Second))
}

// processCPU is the CPU time this process has used, system and user.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuSplit adds up the CPU time that the Redis server and this process (the
// client) spend while one side of a ratio benchmark runs, so that the
// benchmark can say which of the two a ratio follows: on a machine of few
// cores both share them, and the side that costs more CPU per operation is
// slower even when neither is saturated alone.
type cpuSplit struct {
	server, client time.Duration
	n              int
}

// around returns f, n operations, timed (for benchratio.RunTimed) and
// counting into c the CPU that the server and the process spend while it
// runs; the two INFO calls around it count in the CPU (a round trip and
// its parsing each), not in the time.
func (c *cpuSplit) around(tb testing.TB, rdb *redis.Client, f func(n int)) func(n int) time.Duration {
	return func(n int) time.Duration {
		s0, p0 := redisCPU(tb, rdb), processCPU()
		t0 := time.Now()
		f(n)
		d := time.Since(t0)
		c.server += redisCPU(tb, rdb) - s0
		c.client += processCPU() - p0
		c.n += n
		return d
	}
}

// report reports c per operation as metrics of b, their names prefixed by
// side ("" for the variant, "anchor-" for the anchor).
func (c *cpuSplit) report(b *testing.B, side string) {
	if c.n == 0 {
		return
	}
	b.ReportMetric(float64(c.server.Nanoseconds())/1e3/float64(c.n), side+"redis-cpu-µs/op")
	b.ReportMetric(float64(c.client.Nanoseconds())/1e3/float64(c.n), side+"go-cpu-µs/op")
}

// BenchmarkServerTime measures the Redis server's own time per store call,
// as INFO commandstats tells it (usec_per_call of evalsha), on a
// redis-server of the benchmark's own, so that no other client's commands
// mix in and its statistics can be reset. Each sub-benchmark runs one kind
// of call b.N times in 16 rounds, each with statistics of its own, and
// reports the median round and the least disturbed one; the commands the
// scripts issue are listed in the log.
//
// Every kind of call runs twice: one call at a time (the name alone), when
// Redis waits for each next command and a call meets cold caches, and
// from serverTimeLoad goroutines at once (the name and /c=16), when Redis
// is busy, as where its time limits throughput. The raw- rows are the raw
// commands that BenchmarkStoreRatio holds the store against, timed the
// same way (the sum of their usec per operation): raw-first is SET NX PX
// and HSET of the outcome, raw-replay HGETALL of a completed entry.
//
//	go test -run '^$' -bench ServerTime -benchtime 20000x ./idempotency/redisstore
func BenchmarkServerTime(b *testing.B) {
	addr := startRedis(b, false, "--save", "", "--appendonly", "no")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	b.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	resp := idempotency.Response{
		Status: 201,
		Header: benchResp.Header,
		Body:   []byte(`{"id":"pay_123","status":"succeeded"}`),
	}
	fp := idempotency.Fingerprint(benchRequest("k"), []byte(`{"amount":1000,"currency":"EUR"}`))
	rawHeader := headercodec.Append(nil, resp.Header)

	type op struct {
		name  string
		setup func(s *redisstore.Store, k idempotency.Key) int64 // returns the token
		call  func(s *redisstore.Store, k idempotency.Key, tok int64) error
	}
	claim := func(s *redisstore.Store, k idempotency.Key) int64 {
		res, err := s.Claim(ctx, k, fp, time.Minute, time.Hour)
		if err != nil || !res.Acquired {
			b.Fatalf("Claim: %+v %v", res, err)
		}
		return res.Token
	}
	completed := func(s *redisstore.Store, k idempotency.Key) int64 {
		tok := claim(s, k)
		if err := s.Complete(ctx, k, tok, resp, time.Hour); err != nil {
			b.Fatal(err)
		}
		return tok
	}
	ops := []op{
		{"claim", nil, func(s *redisstore.Store, k idempotency.Key, _ int64) error {
			claim(s, k)
			return nil
		}},
		{"complete", claim, func(s *redisstore.Store, k idempotency.Key, tok int64) error {
			return s.Complete(ctx, k, tok, resp, time.Hour)
		}},
		{"replay-claim", completed, func(s *redisstore.Store, k idempotency.Key, _ int64) error {
			res, err := s.Claim(ctx, k, fp, time.Minute, time.Hour)
			if err == nil && (res.Acquired || res.Entry.Response == nil) {
				b.Fatalf("Claim on completed: %+v", res)
			}
			return err
		}},
		{"get", completed, func(s *redisstore.Store, k idempotency.Key, _ int64) error {
			_, _, err := s.Get(ctx, k)
			return err
		}},
		{"renew", claim, func(s *redisstore.Store, k idempotency.Key, tok int64) error {
			return s.Renew(ctx, k, tok, time.Minute)
		}},
		{"release", claim, func(s *redisstore.Store, k idempotency.Key, tok int64) error {
			return s.Release(ctx, k, tok)
		}},
		{"raw-first", nil, func(_ *redisstore.Store, k idempotency.Key, _ int64) error {
			name := "raw:" + k.Key
			if err := rdb.SetNX(ctx, name, fp, time.Hour).Err(); err != nil {
				return err
			}
			return rdb.HSet(ctx, name+":out", "code", "201", "hdr", rawHeader, "body", resp.Body).Err()
		}},
		{"raw-replay", func(_ *redisstore.Store, k idempotency.Key) int64 {
			if err := rdb.HSet(ctx, "raw:"+k.Key, "st", "c", "f", fp, "tok", "1", "code", "201", "hdr", rawHeader, "body", resp.Body).Err(); err != nil {
				b.Fatal(err)
			}
			return 0
		}, func(_ *redisstore.Store, k idempotency.Key, _ int64) error {
			return rdb.HGetAll(ctx, "raw:"+k.Key).Err()
		}},
	}
	for _, c := range []int{1, serverTimeLoad} {
		for _, o := range ops {
			name := o.name
			if c > 1 {
				name += "/c=" + strconv.Itoa(c)
			}
			b.Run(name, func(b *testing.B) { serverTime(b, rdb, o.setup, o.call, strings.HasPrefix(o.name, "raw-"), c) })
		}
	}
}

// serverTimeLoad is how many goroutines BenchmarkServerTime's loaded rows
// call from at once.
const serverTimeLoad = 16

// serverTime is one sub-benchmark of BenchmarkServerTime: call on b.N keys,
// each readied by setup if not nil, from c goroutines at once. It reports
// the server time of EVALSHA per call or, for raw calls, of all the
// commands per call.
func serverTime(b *testing.B, rdb *redis.Client, setup func(*redisstore.Store, idempotency.Key) int64,
	call func(*redisstore.Store, idempotency.Key, int64) error, raw bool, c int) {
	ctx := context.Background()
	// Without the replay fast path, so that replay-claim measures the
	// claim script on every replay.
	s := redisstore.New(rdb, redisstore.WithPrefix("servertime:"+b.Name()+":"+strconv.Itoa(b.N)+":"), redisstore.WithoutReplayFastPath())
	keys := make([]idempotency.Key, b.N)
	toks := make([]int64, b.N)
	for i := range keys {
		keys[i] = idempotency.Key{Scope: "tenant", Key: "key-" + strconv.Itoa(i)}
		if setup != nil {
			toks[i] = setup(s, keys[i])
		}
	}
	warmScripts(b, s) // so that no first EVAL is counted
	// Rounds and their median: a burst of load on a shared machine spoils
	// a round or two, not the figure.
	rounds := min(b.N, 16)
	var perCall []float64
	inner := make(map[string][2]float64)
	b.ResetTimer()
	for r := range rounds {
		b.StopTimer()
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		lo, hi := r*b.N/rounds, (r+1)*b.N/rounds
		b.StartTimer()
		var wg sync.WaitGroup
		for g := range c {
			wg.Go(func() {
				for i := lo + g; i < hi; i += c {
					if err := call(s, keys[i], toks[i]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		if b.Failed() {
			b.FailNow()
		}
		n := float64(hi - lo)
		stats := commandStats(b, rdb)
		if ev := stats["evalsha"]; !raw && ev[0] < n {
			b.Fatalf("%v EVALSHA calls for %v store calls: %v", ev[0], n, stats)
		}
		var usec float64
		for name, st := range stats {
			switch {
			case strings.HasPrefix(name, "config"), strings.HasPrefix(name, "client"), name == "hello":
				// the benchmark's own, and a new connection's
			case raw, name == "evalsha":
				usec += st[1]
			default:
				inner[name] = [2]float64{inner[name][0] + st[0]/n/float64(rounds), inner[name][1] + st[1]}
			}
		}
		perCall = append(perCall, usec/n)
	}
	// The least-disturbed round too: Redis times a call on the wall clock,
	// so a round in which the server lost the CPU to another process counts
	// that time in.
	slices.Sort(perCall)
	b.ReportMetric(perCall[len(perCall)/2], "server-µs/call")
	b.ReportMetric(perCall[0], "min-server-µs/call")
	if !raw {
		var calls []string
		for name, st := range inner {
			calls = append(calls, fmt.Sprintf("%s %.2fx", name, st[0]))
		}
		slices.Sort(calls)
		b.Logf("Redis calls in each EVALSHA: %s", strings.Join(calls, ", "))
	}
	if err := rdb.FlushDB(ctx).Err(); err != nil { // the benchmark's own server
		b.Fatal(err)
	}
}

// TestScriptRedisCalls pins the Redis calls each store call makes inside
// its script, on a Redis of its own whose statistics it resets: each call
// inside a script costs server time, so a claim of a new key is the clock
// and one SET NX, and a replay reads the clock only when an entry in
// progress needs it.
func TestScriptRedisCalls(t *testing.T) {
	addr := startRedis(t, false, "--save", "", "--appendonly", "no")
	// One connection, made by warmScripts: no HELLO in the statistics.
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	s := redisstore.New(rdb)
	warmScripts(t, s)
	k := idempotency.Key{Scope: "tenant", Key: "k"}
	k2 := idempotency.Key{Scope: "tenant", Key: "k2"}
	var tok, tok2 int64
	calls := []struct {
		name string
		call func()
		want map[string]float64 // commands besides evalsha
	}{
		{"claim of a new key", func() { tok = mustClaim(t, s, k, hexFingerprint, longLease, longTTL).Token },
			map[string]float64{"time": 1, "set": 1}},
		{"claim in progress", func() { mustClaim(t, s, k, hexFingerprint, longLease, longTTL) },
			map[string]float64{"time": 1, "set": 1, "get": 1}},
		{"get in progress", func() { _, _, _ = s.Get(ctx, k) },
			map[string]float64{"get": 1, "time": 1}},
		{"complete", func() {
			if err := s.Complete(ctx, k, tok, idempotency.Response{Status: 201, Body: []byte("ok")}, longTTL); err != nil {
				t.Fatal(err)
			}
		}, map[string]float64{"get": 1, "set": 1}},
		{"replay", func() { mustClaim(t, s, k, hexFingerprint, longLease, longTTL) },
			map[string]float64{"time": 1, "set": 1, "get": 1}},
		{"get completed", func() { _, _, _ = s.Get(ctx, k) },
			map[string]float64{"get": 1}},
		{"claim for renew and release", func() { tok2 = mustClaim(t, s, k2, hexFingerprint, longLease, longTTL).Token },
			map[string]float64{"time": 1, "set": 1}},
		{"renew", func() {
			if err := s.Renew(ctx, k2, tok2, longLease); err != nil {
				t.Fatal(err)
			}
		}, map[string]float64{"get": 1, "time": 1, "pttl": 1, "setrange": 1}},
		{"release", func() {
			if err := s.Release(ctx, k2, tok2); err != nil {
				t.Fatal(err)
			}
		}, map[string]float64{"get": 1, "setrange": 1}},
		{"claim of a released key", func() { mustClaim(t, s, k2, hexFingerprint, longLease, longTTL) },
			map[string]float64{"time": 1, "set": 2, "get": 1}},
	}
	for _, c := range calls {
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		c.call()
		got := make(map[string]float64)
		for name, st := range commandStats(t, rdb) {
			switch {
			case name == "evalsha", strings.HasPrefix(name, "config"), name == "hello", strings.HasPrefix(name, "client"):
			default:
				got[name] = st[0]
			}
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s called %v inside its script, want %v", c.name, got, c.want)
		}
	}
}

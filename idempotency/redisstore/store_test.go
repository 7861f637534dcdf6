package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

const (
	longLease = 30 * time.Second
	longTTL   = time.Hour
)

func mustClaim(t *testing.T, s idempotency.Store, k idempotency.Key, fp string, lease, ttl time.Duration) idempotency.ClaimResult {
	t.Helper()
	res, err := s.Claim(context.Background(), k, fp, lease, ttl)
	if err != nil {
		t.Fatalf("Claim(%v): %v", k, err)
	}
	return res
}

func TestKeyEncodingNoCollision(t *testing.T) {
	s, rdb, prefix := newStore(t)
	keys := []idempotency.Key{
		// Pairs that a ":" between scope and key alone would confuse.
		{Scope: "a:b", Key: "c"}, {Scope: "a", Key: "b:c"}, {Scope: "", Key: "a:b:c"}, {Scope: "a:b:c", Key: ""},
		// Pairs that spell the scope's length prefix themselves.
		{Scope: "1:a", Key: "b"}, {Scope: "1", Key: "a:b"}, {Scope: "", Key: "1:a:b"},
		// Characters that Redis patterns read as wildcards.
		{Scope: "tenant*", Key: "k?[x]"},
	}
	for i, k := range keys {
		res := mustClaim(t, s, k, "fp"+strconv.Itoa(i), longLease, longTTL)
		if !res.Acquired {
			t.Fatalf("Claim(%q) not acquired: collides with an earlier key; entry %+v", k, res.Entry)
		}
	}
	for i, k := range keys {
		e, found, err := s.Get(context.Background(), k)
		if err != nil || !found {
			t.Fatalf("Get(%q) = found %v, err %v", k, found, err)
		}
		if want := "fp" + strconv.Itoa(i); e.Fingerprint != want {
			t.Errorf("Get(%q).Fingerprint = %q, want %q", k, e.Fingerprint, want)
		}
	}
	if got := testenv.RedisKeys(t, rdb, prefix); len(got) != len(keys) {
		t.Errorf("store holds %d Redis keys, want one per entry (%d): %q", len(got), len(keys), got)
	}
}

func TestOneStringPerEntryWithTTL(t *testing.T) {
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	k := idempotency.Key{Scope: "tenant", Key: "k1"}
	res := mustClaim(t, s, k, "fp", longLease, 10*time.Second)
	if err := s.Complete(ctx, k, res.Token, idempotency.Response{Status: 201, Body: []byte("ok")}, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	got := testenv.RedisKeys(t, rdb, prefix)
	if len(got) != 1 {
		t.Fatalf("Redis keys = %q, want exactly one", got)
	}
	if typ := rdb.Type(ctx, got[0]).Val(); typ != "string" {
		t.Errorf("TYPE %s = %q, want string", got[0], typ)
	}
	// Completion restarted the ttl at 2s, down from the claim's 10s.
	if pttl := rdb.PTTL(ctx, got[0]).Val(); pttl <= 0 || pttl > 2*time.Second {
		t.Errorf("PTTL after Complete = %v, want in (0, 2s]", pttl)
	}
}

func TestLeaseOnServerClock(t *testing.T) {
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	k := idempotency.Key{Scope: "s", Key: "k"}
	mustClaim(t, s, k, "fp", 10*time.Second, longTTL)
	keys := testenv.RedisKeys(t, rdb, prefix)
	if len(keys) != 1 {
		t.Fatalf("keys %q", keys)
	}
	held := readHeld(t, rdb, keys[0])
	lx := held.start + held.lease
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	left := time.Duration(lx-now.UnixMicro()) * time.Microsecond
	if left <= 9*time.Second || left > 10*time.Second {
		t.Errorf("lease expiry is %v after the server's TIME, want just under 10s", left)
	}

	// Move the lease expiry to one second in the server's past, as if the
	// server's clock had run on: the lease is lapsed for every instance,
	// whatever their own clocks say.
	moveLease(t, rdb, keys[0], now.UnixMicro()-1e6)
	e, _, err := s.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if e.LeaseRemaining > -900*time.Millisecond {
		t.Errorf("LeaseRemaining = %v, want about -1s", e.LeaseRemaining)
	}
	res := mustClaim(t, s, k, "fp", longLease, longTTL)
	if !res.Acquired || !res.TookOver {
		t.Errorf("Claim after server-side lapse = %+v, want a takeover", res)
	}
}

func TestShortLeaseTakeoverFencesOldHolder(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	k := idempotency.Key{Scope: "s", Key: "k"}
	// The lease must outlive the next call even on a loaded machine; should
	// that call still come after it lapsed, it is a takeover and the check
	// of the blocked claim cannot be made.
	const lease = 300 * time.Millisecond
	started := time.Now()
	first := mustClaim(t, s, k, "fp", lease, longTTL)

	blocked := mustClaim(t, s, k, "fp", longLease, longTTL)
	switch {
	case blocked.Acquired && time.Since(started) >= lease:
		t.Skipf("the second Claim came %v after the first, past the %v lease", time.Since(started), lease)
	case blocked.Acquired || blocked.Entry.State != idempotency.StateInProgress:
		t.Fatalf("second Claim with a live lease = %+v, want blocked in progress", blocked)
	}
	if l := blocked.Entry.LeaseRemaining; l <= 0 || l > lease {
		t.Errorf("LeaseRemaining = %v, want in (0, %v]", l, lease)
	}

	// A different fingerprint never takes over, even after the lapse.
	var other idempotency.ClaimResult
	testenv.Eventually(t, "lease lapse", func() bool {
		e, _, err := s.Get(ctx, k)
		return err == nil && e.LeaseRemaining <= 0
	})
	other = mustClaim(t, s, k, "other", longLease, longTTL)
	if other.Acquired || other.Entry.Fingerprint != "fp" {
		t.Fatalf("Claim with another fingerprint = %+v, want blocked by fp", other)
	}

	second := mustClaim(t, s, k, "fp", longLease, longTTL)
	if !second.Acquired || !second.TookOver || second.Token <= first.Token {
		t.Fatalf("takeover = %+v, want acquired, TookOver, token > %d", second, first.Token)
	}
	for name, err := range map[string]error{
		"Renew":    s.Renew(ctx, k, first.Token, longLease),
		"Complete": s.Complete(ctx, k, first.Token, idempotency.Response{Status: 200}, longTTL),
		"Release":  s.Release(ctx, k, first.Token),
	} {
		if !errors.Is(err, idempotency.ErrStaleToken) {
			t.Errorf("%s with the old token = %v, want ErrStaleToken", name, err)
		}
	}
	e, found, err := s.Get(ctx, k)
	if err != nil || !found || e.State != idempotency.StateInProgress || e.Token != second.Token {
		t.Fatalf("Get = %+v %v %v, want the new holder's claim intact", e, found, err)
	}
	if err := s.Complete(ctx, k, second.Token, idempotency.Response{Status: 201}, longTTL); err != nil {
		t.Fatalf("Complete by the new holder: %v", err)
	}
}

func TestRenewLapsedLeaseWithoutTakeover(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	k := idempotency.Key{Scope: "s", Key: "k"}
	res := mustClaim(t, s, k, "fp", time.Millisecond, longTTL)
	testenv.Eventually(t, "lease lapse", func() bool {
		e, _, err := s.Get(ctx, k)
		return err == nil && e.LeaseRemaining <= 0
	})
	if err := s.Renew(ctx, k, res.Token, longLease); err != nil {
		t.Fatalf("Renew after lapse, nobody took over: %v", err)
	}
	again := mustClaim(t, s, k, "fp", longLease, longTTL)
	if again.Acquired || again.Entry.LeaseRemaining < longLease-time.Second {
		t.Errorf("Claim after Renew = %+v, want blocked with about %v left", again, longLease)
	}
}

func TestTokensGrowAcrossReleaseAndExpiry(t *testing.T) {
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	k := idempotency.Key{Scope: "s", Key: "k"}

	t1 := mustClaim(t, s, k, "fp", longLease, longTTL).Token
	if err := s.Release(ctx, k, t1); err != nil {
		t.Fatal(err)
	}
	if _, found, err := s.Get(ctx, k); err != nil || found {
		t.Fatalf("Get after Release: found %v err %v, want absent", found, err)
	}
	if err := s.Release(ctx, k, t1); !errors.Is(err, idempotency.ErrStaleToken) {
		t.Errorf("second Release = %v, want ErrStaleToken", err)
	}
	// A released key is free for any fingerprint, with a greater token.
	r2 := mustClaim(t, s, k, "another", longLease, 50*time.Millisecond)
	if !r2.Acquired || r2.TookOver || r2.Token <= t1 {
		t.Fatalf("Claim after Release = %+v, want acquired anew with token > %d", r2, t1)
	}
	testenv.Eventually(t, "expiry", func() bool { return len(testenv.RedisKeys(t, rdb, prefix)) == 0 })
	r3 := mustClaim(t, s, k, "fp", longLease, longTTL)
	if !r3.Acquired || r3.Token <= r2.Token {
		t.Fatalf("Claim after expiry = %+v, want token > %d", r3, r2.Token)
	}
	// The holder from before the expiry cannot complete the new claim.
	if err := s.Complete(ctx, k, r2.Token, idempotency.Response{Status: 200}, longTTL); !errors.Is(err, idempotency.ErrStaleToken) {
		t.Errorf("Complete with the pre-expiry token = %v, want ErrStaleToken", err)
	}
}

func TestFencedOpsOnCompletedAndAbsent(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	k := idempotency.Key{Scope: "s", Key: "k"}
	if err := s.Complete(ctx, k, 1, idempotency.Response{Status: 200}, longTTL); !errors.Is(err, idempotency.ErrStaleToken) {
		t.Errorf("Complete on an absent key = %v, want ErrStaleToken", err)
	}
	if _, found, _ := s.Get(ctx, k); found {
		t.Fatal("Complete on an absent key created an entry")
	}
	tok := mustClaim(t, s, k, "fp", longLease, longTTL).Token
	if err := s.Complete(ctx, k, tok, idempotency.Response{Status: 201, Body: []byte("first")}, longTTL); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Renew":    s.Renew(ctx, k, tok, longLease),
		"Complete": s.Complete(ctx, k, tok, idempotency.Response{Status: 500, Body: []byte("second")}, longTTL),
		"Release":  s.Release(ctx, k, tok),
	} {
		if !errors.Is(err, idempotency.ErrStaleToken) {
			t.Errorf("%s after Complete = %v, want ErrStaleToken", name, err)
		}
	}
	e, found, err := s.Get(ctx, k)
	if err != nil || !found || e.Response == nil || string(e.Response.Body) != "first" || e.LeaseRemaining != 0 {
		t.Fatalf("Get = %+v %v %v, want the first outcome unchanged", e, found, err)
	}
}

func TestResponseEncoding(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	binary := []byte{0, 1, 2, 0xff, 0xfe, '\r', '\n', '"', '\\', 0}
	tests := []struct {
		name string
		resp idempotency.Response
	}{
		{"nil header and body", idempotency.Response{Status: 204}},
		{"empty header and body", idempotency.Response{Status: 200, Header: http.Header{}, Body: []byte{}}},
		{"binary body, multi-valued header", idempotency.Response{
			Status: 201,
			Header: http.Header{"Content-Type": {"application/octet-stream"}, "Link": {"<a>; rel=x", "<b>; rel=\"y\""}},
			Body:   binary,
		}},
		{"oversize", idempotency.Response{Status: 200, Oversize: true}},
		{"large body", idempotency.Response{Status: 200, Body: bytes.Repeat([]byte("0123456789"), 100_000)}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := idempotency.Key{Scope: "s", Key: strconv.Itoa(i)}
			tok := mustClaim(t, s, k, "fp", longLease, longTTL).Token
			if err := s.Complete(ctx, k, tok, tc.resp, longTTL); err != nil {
				t.Fatal(err)
			}
			e, found, err := s.Get(ctx, k)
			if err != nil || !found || e.State != idempotency.StateCompleted || e.Token != tok || e.Fingerprint != "fp" {
				t.Fatalf("Get = %+v %v %v", e, found, err)
			}
			if !reflect.DeepEqual(*e.Response, tc.resp) {
				t.Errorf("stored response = %+v, want %+v", *e.Response, tc.resp)
			}
			// Claim on a completed entry carries the same response.
			res := mustClaim(t, s, k, "fp", longLease, longTTL)
			if res.Acquired || res.Entry.Response == nil || !reflect.DeepEqual(*res.Entry.Response, tc.resp) {
				t.Errorf("Claim on completed = %+v, want blocked with the stored response", res)
			}
		})
	}
}

func TestConcurrentClaimsOneWinner(t *testing.T) {
	s, _, _ := newStore(t)
	k := idempotency.Key{Scope: "s", Key: "race"}
	const n = 40
	var wg sync.WaitGroup
	results := make(chan idempotency.ClaimResult, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.Claim(context.Background(), k, "fp", longLease, longTTL)
			if err != nil {
				t.Errorf("Claim: %v", err)
				return
			}
			results <- res
		}()
	}
	wg.Wait()
	close(results)
	winners := 0
	for r := range results {
		if r.Acquired {
			winners++
		} else if r.Entry.State != idempotency.StateInProgress {
			t.Errorf("loser saw %+v, want in progress", r.Entry)
		}
	}
	if winners != 1 {
		t.Errorf("%d claims acquired, want exactly 1", winners)
	}
}

// TestCorruptEntryIsAnError: an entry the store could not have written
// (a state it never writes, a field cut short or not a number, flags out
// of range, lengths past the end) makes Get fail with a redisstore error,
// never answer a made-up entry. A claim of it fails the same way when it
// reads as completed; otherwise it fails so too or acquires the key anew
// (no holder could fence a claim the store cannot read), never as a
// takeover.
func TestCorruptEntryIsAnError(t *testing.T) {
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	fp := "\x00fp" // "fp" in its stored form
	for i, v := range []string{
		"zz1,2,3,fp",
		"p",
		"p01x,2,3," + fp,
		"p01,2,3,",    // a fingerprint without its form byte
		"p01,2," + fp, // no lease length
		"r0x,",
		"c01,201,",
		"c01,201,9", // no lengths
		"c01,201,00,0,",
		"c01,201,82,0,ab" + fp, // flags out of range
		"c01,201,62,5,ab" + fp, // a body past the end
		"c01,x,00,0," + fp,
	} {
		k := idempotency.Key{Key: "corrupt-" + strconv.Itoa(i)}
		if err := rdb.Set(ctx, entryName(prefix, k.Key), v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		if e, found, err := s.Get(ctx, k); err == nil || !strings.HasPrefix(err.Error(), "redisstore: get: corrupt entry") {
			t.Errorf("Get of %q = %+v %v %v, want a redisstore error", v, e, found, err)
		}
		res, err := s.Claim(ctx, k, "fp", longLease, longTTL)
		if v[0] == 'c' {
			if err == nil || !strings.HasPrefix(err.Error(), "redisstore: claim: corrupt entry") {
				t.Errorf("Claim of %q = %+v %v, want a redisstore error", v, res, err)
			}
			continue
		}
		if err != nil && strings.HasPrefix(err.Error(), "redisstore: claim: corrupt entry") {
			continue
		}
		if err != nil || !res.Acquired || res.TookOver {
			t.Errorf("Claim of %q = %+v %v, want it acquired anew or a redisstore error", v, res, err)
		}
	}
	// A well-formed entry for contrast: the same shapes, complete.
	k := idempotency.Key{Key: "whole"}
	if err := rdb.Set(ctx, entryName(prefix, k.Key), "c01,201,40,1,x"+fp, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	e, found, err := s.Get(ctx, k)
	if err != nil || !found || e.State != idempotency.StateCompleted || e.Fingerprint != "fp" || e.Response.Status != 201 ||
		string(e.Response.Body) != "x" || e.Response.Header != nil || e.Token != 1 {
		t.Errorf("Get of a well-formed entry = %+v %v %v", e, found, err)
	}
}

func TestErrorsKeepCause(t *testing.T) {
	s, _, _ := newStore(t)
	k := idempotency.Key{Scope: "s", Key: "k"}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Claim(ctx, k, "fp", longLease, longTTL)
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "redisstore: claim") {
		t.Errorf("Claim with a cancelled context = %v, want redisstore error matching context.Canceled", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	if _, _, err := s.Get(ctx, k); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get past the deadline = %v, want context.DeadlineExceeded", err)
	}

	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	ds := redisstore.New(down)
	_, err = ds.Claim(context.Background(), k, "fp", longLease, longTTL)
	if err == nil || errors.Is(err, idempotency.ErrStaleToken) || !strings.HasPrefix(err.Error(), "redisstore: ") {
		t.Errorf("Claim on an unreachable Redis = %v, want a redisstore error", err)
	}
	if err := ds.Complete(context.Background(), k, 1, idempotency.Response{}, longTTL); err == nil || errors.Is(err, idempotency.ErrStaleToken) {
		t.Errorf("Complete on an unreachable Redis = %v, want an error other than ErrStaleToken", err)
	}
	if _, err := s.Claim(context.Background(), k, "fp", longLease, 0); err == nil {
		t.Error("Claim with ttl 0 succeeded, want an error")
	}
}

func TestOneRoundTripPerCall(t *testing.T) {
	s, rdb, _ := newStore(t)
	ctx := context.Background()
	var rt roundTrips
	rdb.AddHook(&rt)
	// Warm the server's script cache so EVALSHA hits.
	warm := idempotency.Key{Scope: "s", Key: "warm"}
	tok := mustClaim(t, s, warm, "fp", longLease, longTTL).Token
	_ = s.Renew(ctx, warm, tok, longLease)
	_ = s.Release(ctx, warm, tok)
	tok = mustClaim(t, s, warm, "fp", longLease, longTTL).Token
	_ = s.Complete(ctx, warm, tok, idempotency.Response{Status: 200}, longTTL)
	_, _, _ = s.Get(ctx, warm)

	k := idempotency.Key{Scope: "s", Key: "k"}
	calls := []struct {
		name string
		fn   func() error
	}{
		{"Claim", func() error { tok = mustClaim(t, s, k, "fp", longLease, longTTL).Token; return nil }},
		{"Renew", func() error { return s.Renew(ctx, k, tok, longLease) }},
		{"Complete", func() error { return s.Complete(ctx, k, tok, idempotency.Response{Status: 201}, longTTL) }},
		{"Get", func() error { _, _, err := s.Get(ctx, k); return err }},
		{"Claim on completed", func() error { mustClaim(t, s, k, "fp", longLease, longTTL); return nil }},
	}
	for _, c := range calls {
		before := rt.n.Load()
		if err := c.fn(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n := rt.n.Load() - before; n != 1 {
			t.Errorf("%s took %d round trips, want 1", c.name, n)
		}
	}
}

// TestWithWaitReportsMissingReplicas: on a primary without replicas, a
// claim fails with ErrNotReplicated and is given back (a retry is refused
// the same way, not told "in progress" until a lease lapses); once a WAIT
// came back short, writes ask ROLE instead of waiting out WAIT again; a
// claim that wrote nothing waits for no replica; a settling write stays
// applied on the primary.
func TestWithWaitReportsMissingReplicas(t *testing.T) {
	rdb := newClient(t)
	if n, err := rdb.Do(context.Background(), "WAIT", 1, 1).Int64(); err != nil || n >= 1 {
		t.Skipf("the test Redis has replicas (%d, %v); this test wants none", n, err)
	}
	prefix := newPrefix(t, rdb)
	var sent commandNames
	rdb.AddHook(&sent)
	s := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithWait(1, 20*time.Millisecond))
	ctx := context.Background()
	k := idempotency.Key{Scope: "s", Key: "k"}
	for i, want := range []string{"WAIT", "ROLE"} {
		sent.reset()
		_, err := s.Claim(ctx, k, "fp", longLease, longTTL)
		if !errors.Is(err, redisstore.ErrNotReplicated) || !strings.Contains(err.Error(), "WithWait") {
			t.Fatalf("Claim %d = %v, want ErrNotReplicated saying why", i+1, err)
		}
		if got := sent.list(); !slices.Contains(got, want) || (want == "ROLE" && slices.Contains(got, "WAIT")) {
			t.Errorf("Claim %d sent %q, want %s (and no WAIT once the primary is known short)", i+1, got, want)
		}
		if _, found, err := s.Get(ctx, k); found || err != nil {
			t.Fatalf("after Claim %d the entry is found (%v, %v); want the unreplicated claim given back", i+1, found, err)
		}
	}
	// A claim held elsewhere: Claim writes nothing and waits for nobody.
	held := mustClaim(t, redisstore.New(rdb, redisstore.WithPrefix(prefix)), k, "fp", longLease, longTTL)
	res, err := s.Claim(ctx, k, "fp", longLease, longTTL)
	if err != nil || res.Acquired {
		t.Fatalf("Claim of a held key = %+v, %v; want blocked without error", res, err)
	}
	if err := s.Release(ctx, k, held.Token); !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Errorf("Release = %v, want ErrNotReplicated", err)
	}
	if _, found, _ := s.Get(ctx, k); found {
		t.Error("Release was not applied on the primary")
	}
}

// commandNames records the names of the commands a client sends, and the
// commands, as its hooks see them.
type commandNames struct {
	mu    sync.Mutex
	names []string
	cmds  []redis.Cmder
}

func (c *commandNames) reset() { c.mu.Lock(); c.names, c.cmds = nil, nil; c.mu.Unlock() }

// commands returns the commands recorded since the last reset.
func (c *commandNames) commands() []redis.Cmder {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.cmds)
}

func (c *commandNames) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.names)
}

func (c *commandNames) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		c.names = append(c.names, strings.ToUpper(cmd.Name()))
	}
	c.cmds = append(c.cmds, cmds...)
}

func (c *commandNames) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandNames) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.add(cmd); return next(ctx, cmd) }
}

func (c *commandNames) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.add(cmds...); return next(ctx, cmds) }
}

// TestRenewKeepsHeldEntryAlive: a claim whose holder keeps renewing must not
// expire under it when the handler outlives the ttl; else a duplicate would
// acquire the key anew and run while the first still does.
func TestRenewKeepsHeldEntryAlive(t *testing.T) {
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	k := idempotency.Key{Scope: "s", Key: "long-handler"}
	r := mustClaim(t, s, k, "fp", longLease, time.Second)
	if err := s.Renew(ctx, k, r.Token, time.Minute); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	keys := testenv.RedisKeys(t, rdb, prefix)
	if len(keys) != 1 {
		t.Fatalf("keys %q", keys)
	}
	// Read the expiry on the server rather than wait for the ttl to pass.
	if ttl := rdb.PTTL(ctx, keys[0]).Val(); ttl < 50*time.Second {
		t.Fatalf("entry expires in %v after Renew(1m), want at least the lease", ttl)
	}
	// Renew never shortens the entry's life.
	if err := s.Renew(ctx, k, r.Token, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, keys[0]).Val(); ttl < 50*time.Second {
		t.Errorf("a short Renew cut the entry's expiry to %v", ttl)
	}
}

// TestRenewInPlace: a renewal of the lease it was claimed with moves the
// lease start in place and keeps the rest of the entry byte for byte,
// growing the entry's expiry to the lease when it was shorter; one of
// another length rewrites the lease and keeps the rest too.
func TestRenewInPlace(t *testing.T) {
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	k := idempotency.Key{Scope: "s", Key: "renewed"}
	r := mustClaim(t, s, k, hexFingerprint, time.Minute, time.Second)
	name := testenv.RedisKeys(t, rdb, prefix)[0]
	before := readHeld(t, rdb, name)
	for _, lease := range []time.Duration{time.Minute, time.Minute, 2 * time.Minute} {
		if err := s.Renew(ctx, k, r.Token, lease); err != nil {
			t.Fatal(err)
		}
		after := readHeld(t, rdb, name)
		if after.head != before.head || after.tok != before.tok || after.storedFingerprint != before.storedFingerprint ||
			after.lease != lease.Microseconds() || after.start < before.start {
			t.Errorf("Renew(%v): entry %+v, was %+v; want the lease %d µs from a later start, the rest unchanged",
				lease, after, before, lease.Microseconds())
		}
		if ttl := rdb.PTTL(ctx, name).Val(); ttl < lease-10*time.Second {
			t.Errorf("Renew(%v): the entry expires in %v, want at least the lease", lease, ttl)
		}
		if e, _, err := s.Get(ctx, k); err != nil || e.LeaseRemaining < lease-10*time.Second || e.LeaseRemaining > lease {
			t.Errorf("Renew(%v): Get = %+v %v, want the whole lease left", lease, e, err)
		}
		before = after
	}
	// A lease start of another length (a clock far behind, as moveLease
	// makes it) is rewritten whole, the rest kept.
	moveLease(t, rdb, name, 2*time.Minute.Microseconds()+12345)
	before = readHeld(t, rdb, name)
	if err := s.Renew(ctx, k, r.Token, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	after := readHeld(t, rdb, name)
	if before.start != 12345 || after.head != before.head || after.tok != before.tok || after.storedFingerprint != before.storedFingerprint ||
		after.lease != (2*time.Minute).Microseconds() || after.start < time.Now().Add(-time.Hour).UnixMicro() {
		t.Errorf("Renew over a short lease start: entry %+v, was %+v; want the start of now, the rest unchanged", after, before)
	}
}

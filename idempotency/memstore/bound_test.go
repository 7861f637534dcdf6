package memstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// usage returns the store's counts of entries and bytes.
func (s *Store) usage() (entries, bytes int64) {
	return s.budget.entries.Load(), s.budget.bytes.Load()
}

// checkBudget fails t unless the store's counts equal what its shards hold:
// the number of map entries, and the sizes of the entries plus those of the
// heap items. It must not run concurrently with store calls.
func checkBudget(t *testing.T, s *Store) {
	t.Helper()
	var entries, bytes int64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			entries++
			bytes += e.size(k)
		}
		for it := range sh.exp.all() {
			bytes += itemSize(it.key)
		}
		sh.mu.Unlock()
	}
	if ge, gb := s.usage(); ge != entries || gb != bytes {
		t.Errorf("budget counts %d entries and %d bytes; the shards hold %d and %d", ge, gb, entries, bytes)
	}
}

// claimSize is what a claim of k with fingerprint fp costs: its entry with
// the reserve, and its heap item.
func claimSize(k idempotency.Key, fp string) int64 {
	e := entry{fingerprint: fp}
	return e.size(k) + itemSize(k)
}

func wantFull(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrFull) || !strings.HasPrefix(err.Error(), "memstore: ") {
		t.Fatalf("err = %v, want ErrFull with a message starting \"memstore: \"", err)
	}
}

func TestFullAtMaxEntries(t *testing.T) {
	ctx := context.Background()
	s, _ := newFake(t, WithMaxEntries(3))
	key := func(i int) idempotency.Key { return idempotency.Key{Scope: "s", Key: strconv.Itoa(i)} }
	var tokens []int64
	for i := range 3 {
		r, err := s.Claim(ctx, key(i), "fp", time.Second, time.Hour)
		if err != nil || !r.Acquired {
			t.Fatalf("Claim %d = %+v, %v", i, r, err)
		}
		tokens = append(tokens, r.Token)
	}
	if err := s.Complete(ctx, key(0), tokens[0], idempotency.Response{Status: 201, Body: []byte("done")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	_, err := s.Claim(ctx, key(3), "fp", time.Second, time.Hour)
	wantFull(t, err)

	// Nothing was evicted: the record replays, the claim still blocks.
	if r, err := s.Claim(ctx, key(0), "fp", time.Second, time.Hour); err != nil || r.Acquired || string(r.Entry.Response.Body) != "done" {
		t.Errorf("Claim of the completed key at the bound = %+v, %v; want its replay", r, err)
	}
	if r, err := s.Claim(ctx, key(1), "fp", time.Second, time.Hour); err != nil || r.Acquired || r.Entry.State != idempotency.StateInProgress {
		t.Errorf("Claim of the key in progress at the bound = %+v, %v; want it blocked", r, err)
	}
	if n := s.count(); n != 3 {
		t.Errorf("count = %d, want 3", n)
	}

	// A release frees a slot at once.
	if err := s.Release(ctx, key(2), tokens[2]); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Claim(ctx, key(3), "fp", time.Second, time.Hour); err != nil || !r.Acquired {
		t.Errorf("Claim after a release = %+v, %v; want acquired", r, err)
	}
	checkBudget(t, s)
}

func TestFullAtMaxBytes(t *testing.T) {
	ctx := context.Background()
	const max = 64 << 10
	s, _ := newFake(t, WithMaxBytes(max))
	n := 0
	for ; ; n++ {
		_, err := s.Claim(ctx, idempotency.Key{Key: fmt.Sprintf("%06d", n)}, "fp", time.Second, time.Hour)
		if err != nil {
			wantFull(t, err)
			break
		}
	}
	k := idempotency.Key{Key: "000000"}
	if per := claimSize(k, "fp"); n != max/int(per) {
		t.Errorf("%d claims of %d bytes fit in %d bytes, want %d", n, per, max, max/per)
	}
	if _, b := s.usage(); b > max {
		t.Errorf("bytes in use = %d, over the bound %d", b, max)
	}
	checkBudget(t, s)
}

// TestCompleteThatDoesNotFit: a response too large for the room left is
// refused with ErrResponseNotStorable and changes nothing; the same claim can
// then always be completed as not replayable, even with a shorter ttl, which
// costs a heap item.
func TestCompleteThatDoesNotFit(t *testing.T) {
	ctx := context.Background()
	k := idempotency.Key{Scope: "s", Key: "k"}
	other := idempotency.Key{Scope: "s", Key: "j"}
	// Room for exactly two claims: the store is full once both are made.
	s, clk := newFake(t, WithMaxBytes(claimSize(k, "fp")+claimSize(other, "fp")))
	r, err := s.Claim(ctx, k, "fp", time.Second, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatal(r, err)
	}
	if _, err := s.Claim(ctx, other, "fp", time.Second, time.Hour); err != nil {
		t.Fatal(err)
	}
	_, before := s.usage()

	big := idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"text/plain"}}, Body: bytes.Repeat([]byte("x"), 100)}
	err = s.Complete(ctx, k, r.Token, big, time.Hour)
	if !errors.Is(err, idempotency.ErrResponseNotStorable) || !strings.HasPrefix(err.Error(), "memstore: ") {
		t.Fatalf("Complete of a response that does not fit = %v, want ErrResponseNotStorable", err)
	}
	if _, after := s.usage(); after != before {
		t.Errorf("refused Complete moved the bytes in use from %d to %d", before, after)
	}
	if e, found, _ := s.Get(ctx, k); !found || e.State != idempotency.StateInProgress || e.Token != r.Token || e.LeaseRemaining != time.Second {
		t.Errorf("entry after the refused Complete = %+v, %v; want it unchanged", e, found)
	}

	marker := idempotency.Response{Status: 201, Oversize: true}
	if err := s.Complete(ctx, k, r.Token, marker, time.Minute); err != nil {
		t.Fatalf("Complete as not replayable in a full store: %v", err)
	}
	e, _, _ := s.Get(ctx, k)
	if e.State != idempotency.StateCompleted || e.Response == nil || !e.Response.Oversize || e.Response.Status != 201 {
		t.Errorf("entry after the marker = %+v", e)
	}
	checkBudget(t, s)
	clk.Advance(time.Hour)
	s.sweep(clk.Now())
	checkBudget(t, s)
	if e, b := s.usage(); e != 0 || b != 0 {
		t.Errorf("after expiry: %d entries and %d bytes in use, want 0 and 0", e, b)
	}
}

// TestTakeoverThatWouldGrow: a takeover with a ttl shorter than the one
// queued needs a heap item more, which a full store refuses; with the same
// ttl it needs nothing and succeeds.
func TestTakeoverThatWouldGrow(t *testing.T) {
	ctx := context.Background()
	k := idempotency.Key{Key: "k"}
	s, clk := newFake(t, WithMaxBytes(claimSize(k, "fp")))
	if _, err := s.Claim(ctx, k, "fp", time.Second, time.Hour); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	_, err := s.Claim(ctx, k, "fp", time.Second, time.Minute)
	wantFull(t, err)
	r, err := s.Claim(ctx, k, "fp", time.Second, time.Hour)
	if err != nil || !r.Acquired || !r.TookOver || r.LeaseRemaining != time.Second {
		t.Fatalf("takeover with the same ttl = %+v, %v; want acquired, took over, a 1s lease", r, err)
	}
	checkBudget(t, s)
}

// TestAcceptsWorkAfterExpiry: a full store takes new keys again once its
// entries expired, without a background sweep: the Claim that finds it full
// sweeps first.
func TestAcceptsWorkAfterExpiry(t *testing.T) {
	ctx := context.Background()
	s, clk := newFake(t, WithMaxEntries(100), WithMaxBytes(1<<20))
	fill := func(prefix string) {
		t.Helper()
		for i := 0; ; i++ {
			k := idempotency.Key{Key: prefix + strconv.Itoa(i)}
			r, err := s.Claim(ctx, k, "fp", time.Second, time.Minute)
			if err != nil {
				wantFull(t, err)
				return
			}
			if i%2 == 0 {
				if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte("ok")}, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	fill("a")
	clk.Advance(time.Minute - time.Nanosecond)
	_, err := s.Claim(ctx, idempotency.Key{Key: "b"}, "fp", time.Second, time.Minute)
	wantFull(t, err)
	clk.Advance(time.Nanosecond)
	fill("c")
	if n := s.count(); n != 100 {
		t.Errorf("count after refilling = %d, want 100", n)
	}
	checkBudget(t, s)
}

// TestCountsReturnToZero: every way out of the store (release, lazy drop,
// sweep, takeovers and completions that pushed extra heap items) gives its
// entry and bytes back.
func TestCountsReturnToZero(t *testing.T) {
	ctx := context.Background()
	s, clk := newFake(t)
	hdr := http.Header{"Content-Type": {"application/json"}, "Link": {"<a>", "<b>"}, "Etag": nil, "X-Empty": {}}
	for i := range 300 {
		k := idempotency.Key{Scope: "scope-" + strconv.Itoa(i%7), Key: "key-" + strconv.Itoa(i)}
		fp := "v1:" + strings.Repeat("f", i%64)
		r, err := s.Claim(ctx, k, fp, time.Second, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		switch i % 6 {
		case 0: // released
			err = s.Release(ctx, k, r.Token)
		case 1: // completed with the same ttl
			err = s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Header: hdr, Body: make([]byte, i)}, time.Hour)
		case 2: // completed with a shorter ttl: a second heap item
			err = s.Complete(ctx, k, r.Token, idempotency.Response{Status: 200, Oversize: true}, time.Minute)
		case 3: // taken over with a shorter ttl, then completed with a shorter one still
			clk.Advance(time.Second)
			if r, err = s.Claim(ctx, k, fp, time.Second, 30*time.Minute); err != nil || !r.TookOver {
				t.Fatalf("takeover = %+v, %v", r, err)
			}
			err = s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte("x")}, 10*time.Minute)
		case 4: // renewed past its ttl
			err = s.Renew(ctx, k, r.Token, 2*time.Hour)
		}
		if err != nil {
			t.Fatal(err)
		}
		checkBudget(t, s)
	}
	// Lazy drops: expired entries touched before the sweep comes.
	clk.Advance(time.Hour)
	for i := 0; i < 300; i += 5 {
		s.Get(ctx, idempotency.Key{Scope: "scope-" + strconv.Itoa(i%7), Key: "key-" + strconv.Itoa(i)})
	}
	checkBudget(t, s)
	s.sweep(clk.Now())
	checkBudget(t, s)
	clk.Advance(2 * time.Hour)
	s.sweep(clk.Now())
	if e, b := s.usage(); e != 0 || b != 0 {
		t.Errorf("after everything expired or was released: %d entries and %d bytes in use, want 0 and 0", e, b)
	}
	checkBudget(t, s)
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestHeapWithinBound fills a store until it refuses work and measures the
// live heap it holds against its byte bound. The estimate is meant to be a
// little above the real heap; the factor allowed, 1.25, leaves room for the
// test's own allocations and for a Go runtime whose maps or slices grow a
// little differently. The per-entry overhead is where the estimate would go
// wrong, so the second case stores many small entries; the last fills the
// store with what released claims leave behind, their expiry queue items.
func TestHeapWithinBound(t *testing.T) {
	const (
		bound  = 2 << 20
		factor = 1.25
	)
	small := idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/payments/1"}}, Body: []byte(`{"id":1}`)}
	cases := []struct {
		name   string
		resp   idempotency.Response
		replay bool // each entry is replayed once, which gives it its shared view
		// release: each claim is released instead of completed, and the
		// store fills up with the expiry queue items it leaves behind.
		release bool
	}{
		{"1 KiB bodies", idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: bytes.Repeat([]byte("b"), 1024)}, false, false},
		{"small entries", small, false, false},
		{"small entries replayed", small, true, false},
		{"released claims", idempotency.Response{}, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			before := liveHeap()
			s := New(WithCleanupInterval(0), WithMaxBytes(bound))
			n := 0
			for ; ; n++ {
				// Keys and fingerprints of the size the Middleware
				// makes, allocated like a request's.
				k := idempotency.Key{Scope: "tenant-" + strconv.Itoa(n%10), Key: "0b6e6c8e-4d1f-4b7a-9c1e-" + strconv.FormatInt(1e11+int64(n), 10)}
				fp := "v1:" + strings.Repeat(strconv.Itoa(n%10), 64)
				r, err := s.Claim(ctx, k, fp, time.Minute, time.Hour)
				if err != nil {
					wantFull(t, err)
					break
				}
				if c.release {
					if err := s.Release(ctx, k, r.Token); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := s.Complete(ctx, k, r.Token, c.resp, time.Hour); err != nil {
					if !errors.Is(err, idempotency.ErrResponseNotStorable) {
						t.Fatal(err)
					}
					if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Oversize: true}, time.Hour); err != nil {
						t.Fatalf("marker: %v", err)
					}
				}
				if c.replay {
					if r, err := s.Claim(ctx, k, fp, time.Minute, time.Hour); err != nil || r.Acquired {
						t.Fatalf("replay: %+v, %v", r, err)
					}
				}
			}
			held := liveHeap() - before
			runtime.KeepAlive(s)
			_, used := s.usage()
			t.Logf("%d entries: %d bytes estimated, %d bytes of live heap (%.2f of the bound %d)", n, used, held, float64(held)/bound, bound)
			if used > bound {
				t.Errorf("estimate %d over the bound %d", used, bound)
			}
			if float64(held) > factor*bound {
				t.Errorf("the full store holds %d bytes of heap, more than %.2f times its bound of %d", held, factor, bound)
			}
			s.Close()
		})
	}
}

// TestConcurrentClaimsAtBound: goroutines that each hold up to four claims
// on new keys, releasing the oldest to make the next, keep the store at its
// entry bound; it never goes past it, and the counts are exact when they are
// done.
func TestConcurrentClaimsAtBound(t *testing.T) {
	ctx := context.Background()
	const max = 40 // below the 16 goroutines' 48 to 64 claims
	s, _ := newFake(t, WithMaxEntries(max))
	var (
		wg       sync.WaitGroup
		kept     atomic.Int64
		full     atomic.Int64
		overflow atomic.Int64
	)
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if e, _ := s.usage(); e > max {
				overflow.Store(e)
			}
			runtime.Gosched()
		}
	}()
	type claim struct {
		k     idempotency.Key
		token int64
	}
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []claim
			for i := range 500 {
				k := idempotency.Key{Scope: strconv.Itoa(g), Key: strconv.Itoa(i)}
				r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
				switch {
				case errors.Is(err, ErrFull):
					full.Add(1)
				case err != nil || !r.Acquired:
					t.Errorf("Claim = %+v, %v", r, err)
				default:
					mine = append(mine, claim{k, r.Token})
				}
				if len(mine) == 4 {
					if err := s.Release(ctx, mine[0].k, mine[0].token); err != nil {
						t.Errorf("Release: %v", err)
					}
					mine = mine[1:]
				}
			}
			kept.Add(int64(len(mine)))
		}()
	}
	wg.Wait()
	close(stop)
	<-watched
	if e := overflow.Load(); e != 0 {
		t.Errorf("the entry count reached %d, past the bound of %d", e, max)
	}
	if n := s.count(); int64(n) != kept.Load() || n > max {
		t.Errorf("%d entries stored, %d claims kept; want them equal and at most %d", n, kept.Load(), max)
	}
	if full.Load() == 0 {
		t.Error("no Claim was refused: the test did not reach the bound")
	}
	checkBudget(t, s)
}

// TestMiddlewareCompleteWithoutRoom: through the Middleware, a response
// (here with a header of many values) that the byte bound has no room for
// reaches its client; the claim is not released but completed as not
// replayable, so that a retry gets the 410 problem and the handler runs
// once.
func TestMiddlewareCompleteWithoutRoom(t *testing.T) {
	s, _ := newFake(t, WithMaxBytes(4000))
	runs := 0
	body := strings.Repeat("z", 5000)
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs++
		w.Header().Set("Content-Type", "text/plain")
		for i := range 50 {
			w.Header().Add("Link", "</p/"+strconv.Itoa(i)+">")
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(body))
	}))
	do := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "no-room-1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := do(); rec.Code != http.StatusCreated || rec.Body.String() != body || len(rec.Header()["Link"]) != 50 {
		t.Fatalf("first request = %d, %d bytes, %d Link values; want 201 and the handler's answer", rec.Code, rec.Body.Len(), len(rec.Header()["Link"]))
	}
	e, found, err := s.Get(context.Background(), idempotency.Key{Key: "no-room-1"})
	if err != nil || !found || e.State != idempotency.StateCompleted || e.Response == nil || !e.Response.Oversize || e.Response.Status != http.StatusCreated {
		t.Fatalf("entry = %+v, %v, %v; want completed as not replayable", e, found, err)
	}
	if rec := do(); rec.Code != http.StatusGone {
		t.Errorf("retry = %d %q, want 410 (completed, not replayable)", rec.Code, rec.Body)
	}
	if runs != 1 {
		t.Errorf("handler ran %d times, want 1", runs)
	}
	checkBudget(t, s)
}

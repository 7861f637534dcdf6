package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestWaiterThatFallsOpenGivesBackItsSlot checks that a waiter whose claim
// fails with WithFailOpen gives back its waiting slot before its handler
// runs unprotected, as a waiter that wins the key does: the slot bounds
// requests that wait, not handlers that run, so another duplicate may
// still wait for its own key meanwhile.
func TestWaiterThatFallsOpenGivesBackItsSlot(t *testing.T) {
	base := newStore(t)
	var mu sync.Mutex
	claims := map[string]int{}
	st := &faultyStore{Store: base, claim: func(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
		mu.Lock()
		claims[k.Key]++
		n := claims[k.Key]
		mu.Unlock()
		if k.Key == "a" && n == 3 { // the waiter's claim after its first pause
			return idempotency.ClaimResult{}, errBlip
		}
		return base.Claim(ctx, k, fp, lease, ttl)
	}}
	claimsOf := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		return claims[key]
	}
	hold := make(chan struct{})
	started := make(chan struct{}, 4)
	app := &counter{before: func(_ http.ResponseWriter, r *http.Request) int {
		if r.Header.Get("X-Hold") != "" {
			started <- struct{}{}
			<-hold
		}
		return 0
	}}
	h := idempotency.Middleware(st, idempotency.WithWaitForResult(testenv.Patience),
		idempotency.WithMaxWaiters(1), idempotency.WithFailOpen(true))(app)
	held := withHeader("X-Hold", "1")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(hold)
	run := func(key string, opts ...reqOpt) {
		wg.Add(1)
		go func() { defer wg.Done(); post(h, key, `{}`, opts...) }()
	}
	run("a", held) // holds a
	<-started
	run("a", held) // waits for a, then its claim fails: it runs unprotected
	<-started
	run("b", held) // holds b
	<-started
	c := make(chan int, 1)
	go func() { c <- post(h, "b", `{}`).Code }() // may wait for b: no other request waits
	testenv.Eventually(t, "the duplicate of b waits or is answered", func() bool {
		return claimsOf("b") >= 3 || len(c) > 0
	})
	select {
	case code := <-c:
		t.Fatalf("the duplicate of b was answered %d at once: the request running unprotected still holds the only waiting slot", code)
	default:
	}
}

// getFlaky adds a Get that fails its first n calls to a faultyStore.
type getFlaky struct {
	*faultyStore
	fails atomic.Int64
}

func (g *getFlaky) Get(ctx context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	if g.fails.Add(-1) >= 0 {
		return idempotency.Entry{}, false, errBlip
	}
	return g.faultyStore.Get(ctx, k)
}

// TestCompleteAnswerLostThenAGetBlip checks that a Complete applied whose
// answer was lost is recognised as stored even when the look at the entry
// that tells so fails once as well: the look is retried within the store
// timeout like the Complete, instead of taking the key for taken over
// (409 to the client and OutcomeLeaseLost, for an outcome that is stored).
func TestCompleteAnswerLostThenAGetBlip(t *testing.T) {
	base := newStore(t)
	var tries atomic.Int64
	st := &getFlaky{faultyStore: &faultyStore{Store: base, complete: func(ctx context.Context, k idempotency.Key, tok int64, resp idempotency.Response, ttl time.Duration) error {
		err := base.Complete(ctx, k, tok, resp, ttl)
		if tries.Add(1) == 1 && err == nil {
			return fmt.Errorf("reply lost: %w", errBlip)
		}
		return err
	}}}
	st.fails.Store(1)
	var ev events
	h := idempotency.Middleware(st, idempotency.WithHook(ev.hook))(&counter{})
	first := post(h, "k", `{}`)
	if first.Code != http.StatusCreated {
		t.Fatalf("status = %d %s, want the stored 201", first.Code, first.Body)
	}
	if got := ev.outcomes(); len(got) != 1 || got[0] != idempotency.OutcomeNew {
		e, _ := ev.find(idempotency.OutcomeLeaseLost)
		t.Fatalf("events %v (%v), want only new", got, e.Err)
	}
	wantReplay(t, post(h, "k", `{}`), first)
}

// getDown adds a Get that fails while down is set to a faultyStore.
type getDown struct {
	*faultyStore
	down atomic.Bool
}

func (g *getDown) Get(ctx context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	if g.down.Load() {
		return idempotency.Entry{}, false, errBlip
	}
	return g.faultyStore.Get(ctx, k)
}

// TestCompleteAnswerLostAndEntryUnreadableIsTakenForLost checks what
// OutcomeLeaseLost documents for a Complete that took effect but whose
// answer was lost, when the entry cannot be read within the store timeout
// to tell so: the claim is taken for taken over (409 to the client,
// OutcomeLeaseLost, within the store timeout), though the outcome is
// stored, and the retry replays it.
func TestCompleteAnswerLostAndEntryUnreadableIsTakenForLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := newStore(t, memstore.WithClock(time.Now), memstore.WithCleanupInterval(0))
		var tries atomic.Int64
		st := &getDown{faultyStore: &faultyStore{Store: base, complete: func(ctx context.Context, k idempotency.Key, tok int64, resp idempotency.Response, ttl time.Duration) error {
			err := base.Complete(ctx, k, tok, resp, ttl)
			if tries.Add(1) == 1 && err == nil {
				return fmt.Errorf("reply lost: %w", errBlip)
			}
			return err
		}}}
		st.down.Store(true)
		var ev events
		const timeout = time.Second
		h := idempotency.Middleware(st, idempotency.WithHook(ev.hook), idempotency.WithClock(clock.Real),
			idempotency.WithStoreTimeout(timeout))(&counter{})
		began := time.Now()
		if w := post(h, "k", `{}`); w.Code != http.StatusConflict {
			t.Fatalf("status = %d %s, want 409 in place of a response whose record could not be read", w.Code, w.Body)
		}
		if took := time.Since(began); took > timeout {
			t.Errorf("the request took %v, over the store timeout %v", took, timeout)
		}
		e, ok := ev.find(idempotency.OutcomeLeaseLost)
		if !ok || !errors.Is(e.Err, idempotency.ErrLeaseLost) || len(ev.outcomes()) != 1 {
			t.Fatalf("events %v (%v), want only lease_lost", ev.outcomes(), e.Err)
		}
		st.down.Store(false)
		if w := post(h, "k", `{}`); w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "true" {
			t.Fatalf("retry = %d %s, want the stored 201 replayed", w.Code, w.Body)
		}
	})
}

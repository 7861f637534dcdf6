package idempotency_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
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

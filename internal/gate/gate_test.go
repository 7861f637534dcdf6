package gate

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	for _, tt := range []struct{ pool, reserve, want int }{
		{1, 0, 1}, {8, 0, 8}, {0, 0, 1}, {-3, 0, 1},
		{1, 1, 1}, {2, 1, 1}, {4, 1, 3}, {8, 2, 6}, {20, 5, 15}, {8, 8, 1}, {8, -1, 8},
	} {
		if got := NewReserving(tt.pool, tt.reserve).Limit(); got != tt.want {
			t.Errorf("NewReserving(%d, %d).Limit() = %d, want %d", tt.pool, tt.reserve, got, tt.want)
		}
	}
	if got := New(8).Limit(); got != 8 {
		t.Errorf("New(8).Limit() = %d, want 8", got)
	}
}

// enterAll enters g n times, failing the test if any Enter waits.
func enterAll(t *testing.T, g *Gate, n int) {
	t.Helper()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := g.Enter(ctx)
		cancel()
		if err != nil {
			t.Fatalf("Enter %d of %d: %v", i+1, n, err)
		}
	}
}

// full reports whether Enter on g waits (it gives the place back if not).
func full(t *testing.T, g *Gate) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := g.Enter(ctx)
	if err == nil {
		g.Leave()
		return false
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Enter = %v, want nil or the context's error", err)
	}
	return true
}

// entered starts an Enter in the background and returns its result.
func entered(g *Gate) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- g.Enter(context.Background()) }()
	return ch
}

// waitEntered fails the test unless the Enter behind ch returns nil soon.
func waitEntered(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: Enter still waits", what)
	}
}

func TestRequestPathTakesTheWholePoolWhileNothingSettles(t *testing.T) {
	g := New(4)
	enterAll(t, g, 4)
	if !full(t, g) {
		t.Fatal("a fifth Enter on a pool of 4 did not wait")
	}
	ch := entered(g)
	g.Leave()
	waitEntered(t, ch, "after a Leave")
}

func TestSettlingCallsComeFirst(t *testing.T) {
	g := New(4)
	enterAll(t, g, 4)
	// A settling call arrives while the request path holds every
	// connection: it waits in the pool for the first one given back, so
	// a request-path call that leaves must not be replaced.
	g.Settle()
	ch := entered(g)
	g.Leave()
	select {
	case err := <-ch:
		t.Fatalf("Enter = %v while a settling call needed the place given back", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.Settled()
	waitEntered(t, ch, "after Settled")
}

func TestSettlingCallsShrinkTheRequestPath(t *testing.T) {
	g := New(4)
	g.Settle()
	g.Settle()
	enterAll(t, g, 2)
	if !full(t, g) {
		t.Fatal("with 2 settling calls on a pool of 4, a third request-path call entered")
	}
	g.Settled()
	enterAll(t, g, 1)
	if !full(t, g) {
		t.Fatal("with 1 settling call and 3 inside on a pool of 4, another entered")
	}
}

func TestReserveHoldsWithNothingSettling(t *testing.T) {
	g := NewReserving(4, 1)
	enterAll(t, g, 3)
	if !full(t, g) {
		t.Fatal("a gate reserving 1 of 4 let a fourth request-path call in")
	}
}

func TestEnterGivesUpWithItsContext(t *testing.T) {
	g := New(1)
	enterAll(t, g, 1)
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- g.Enter(ctx) }()
	time.Sleep(5 * time.Millisecond) // let it queue; the test holds either way
	cancel()
	select {
	case err := <-ch:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Enter = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Enter did not return when its context ended")
	}
	// The abandoned wait holds no place: the one given back goes to the
	// next caller.
	next := entered(g)
	g.Leave()
	waitEntered(t, next, "after the abandoned wait")
}

func TestPlacesGoInArrivalOrder(t *testing.T) {
	g := New(1)
	enterAll(t, g, 1)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.Enter(context.Background()); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			g.Leave()
		}()
		// Queue them one after the other.
		deadline := time.Now().Add(5 * time.Second)
		for {
			g.mu.Lock()
			n := len(g.waiters)
			g.mu.Unlock()
			if n == i+1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	g.Leave()
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("places went in the order %v, want 0 to 4", order)
		}
	}
}

// TestNeverOverTheLimit runs request-path and settling calls at random,
// cancelling some waits, and checks that no more request-path calls than
// the limit are ever inside, and that every place is given back (the rule
// for settling calls is held by the deterministic tests above).
func TestNeverOverTheLimit(t *testing.T) {
	const size, reserve = 6, 2
	g := NewReserving(size, reserve)
	var (
		mu         sync.Mutex
		inside     int
		violations int
	)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 400 {
				if rng.IntN(3) == 0 {
					g.Settle()
					time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
					g.Settled()
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(200))*time.Microsecond)
				err := g.Enter(ctx)
				cancel()
				if err != nil {
					continue
				}
				mu.Lock()
				inside++
				if inside > size-reserve {
					violations++
				}
				mu.Unlock()
				time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
				mu.Lock()
				inside--
				mu.Unlock()
				g.Leave()
			}
		}()
	}
	wg.Wait()
	if violations > 0 {
		t.Fatalf("%d times more request-path calls inside than the pool allowed", violations)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inside != 0 || g.settling != 0 || len(g.waiters) != 0 {
		t.Fatalf("after the run: inside %d, settling %d, waiting %d; want 0, 0, 0", g.inside, g.settling, len(g.waiters))
	}
}

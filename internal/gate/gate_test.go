package gate

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

func TestNewKeepsAQuarter(t *testing.T) {
	for _, tt := range []struct{ pool, want int }{
		{1, 1}, {2, 1}, {4, 3}, {8, 6}, {10, 8}, {20, 15}, {0, 1}, {-3, 1},
	} {
		if got := New(tt.pool, nil).Limit(); got != tt.want {
			t.Errorf("New(%d, nil).Limit() = %d, want %d", tt.pool, got, tt.want)
		}
	}
}

// testWaiting waits until n request-path calls wait in g.
func testWaiting(t *testing.T, g *Gate, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, _, waiting := g.Load(); waiting == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d request-path calls never waited", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// pool stands for a pool's count of free connections.
type pool struct {
	mu   sync.Mutex
	free int
}

func (p *pool) set(n int) { p.mu.Lock(); p.free = n; p.mu.Unlock() }
func (p *pool) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.free
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

// TestHowManyEnter fills gates with request-path calls, nothing settling,
// and checks where each is full.
func TestHowManyEnter(t *testing.T) {
	for _, tt := range []struct {
		name       string
		pool, free int // free < 0: a gate that does not lend
		want       int
	}{
		{"no lending", 4, -1, 3},
		{"one free", 4, 1, 4},
		{"none free", 4, 0, 3},               // what else uses the pool holds the quarter
		{"more free than the pool", 8, 5, 8}, // never more than the pool
	} {
		t.Run(tt.name, func(t *testing.T) {
			var free func() int
			if tt.free >= 0 {
				free = (&pool{free: tt.free}).count
			}
			g := New(tt.pool, free)
			enterAll(t, g, tt.want)
			if !full(t, g) {
				t.Fatalf("request-path call %d entered a gate for a pool of %d", tt.want+1, tt.pool)
			}
		})
	}
}

func TestLendsNothingASettlingCallNeeds(t *testing.T) {
	p := &pool{free: 2}
	g := New(8, p.count) // 6 without lending
	enterAll(t, g, 6)
	g.Settle()
	enterAll(t, g, 1) // 2 free, 1 for the settling call: one to lend
	p.set(1)          // the lent one is taken
	if !full(t, g) {
		t.Fatal("the gate lent the free connection a settling call announced it needs")
	}
	ch := entered(g)
	g.Settled()
	waitEntered(t, ch, "after Settled with a connection free")
}

func TestWaitersAreLentToWhenPlacesAreGivenBack(t *testing.T) {
	p := &pool{free: 0}
	g := New(4, p.count)
	enterAll(t, g, 3)
	ch := entered(g)
	testWaiting(t, g, 1)
	// A connection frees up outside the gate's sight; the waiter gets it
	// at the next Leave or Settled, not before (the gate is not told).
	p.set(1)
	g.Settle()
	g.Settled() // one free, none settling: lend it
	waitEntered(t, ch, "after Settled with a connection free")
}

func TestEnterGivesUpWithItsContext(t *testing.T) {
	g := New(1, nil)
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
	g := New(1, nil)
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

func TestLendsOneConnectionOnce(t *testing.T) {
	p := &pool{free: 0}
	g := New(8, p.count) // 6 without lending
	enterAll(t, g, 6)
	a, b := entered(g), entered(g)
	testWaiting(t, g, 2)
	// One connection frees up; the pool shows it free until a lent call
	// takes it, so the waiters woken together must not both get it.
	p.set(1)
	g.Settle()
	g.Settled()
	select {
	case <-a:
	case <-b:
	case <-time.After(5 * time.Second):
		t.Fatal("no waiter was lent the free connection")
	}
	if in, _, waiting := g.Load(); in != 7 || waiting != 1 {
		t.Fatalf("after lending one free connection: %d inside, %d waiting; want 7 and 1", in, waiting)
	}
	g.Leave()
	g.Leave()
}

// TestNeverOverThePool runs request-path and settling calls at random
// over a pool whose other users hold a random share of it, cancelling
// some waits, and checks that a request-path call only enters within the
// limit or onto a connection that was free beyond the settling calls'
// needs, never more than the pool, and that every place is given back.
func TestNeverOverThePool(t *testing.T) {
	const size = 8
	p := &pool{}
	var (
		mu                         sync.Mutex
		inside, settling, violated int
	)
	// free is the pool's free connections: what neither the request path
	// nor the settling calls nor the other users hold. Called with g.mu
	// held, so inside and settling are the gate's own, mirrored.
	g := New(size, func() int {
		mu.Lock()
		defer mu.Unlock()
		return max(size-inside-settling-p.count(), 0)
	})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 400 {
				switch rng.IntN(8) {
				case 0:
					p.set(rng.IntN(4))
				case 1, 2:
					g.Settle()
					mu.Lock()
					settling++
					mu.Unlock()
					time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
					mu.Lock()
					settling--
					mu.Unlock()
					g.Settled()
				default:
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(200))*time.Microsecond)
					err := g.Enter(ctx)
					cancel()
					if err != nil {
						continue
					}
					mu.Lock()
					inside++
					if inside > size {
						violated++
					}
					mu.Unlock()
					time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
					mu.Lock()
					inside--
					mu.Unlock()
					g.Leave()
				}
			}
		}()
	}
	wg.Wait()
	if violated > 0 {
		t.Fatalf("%d times more request-path calls inside than the pool has connections", violated)
	}
	in, st, waiting := g.Load()
	if in != 0 || st != 0 || waiting != 0 {
		t.Fatalf("after the run: inside %d, settling %d, waiting %d; want 0, 0, 0", in, st, waiting)
	}
}

package pgstore_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
)

// listenerStacks returns the stacks of the goroutines that run a Store's
// LISTEN connection.
func listenerStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "pgstore.(*watcher).listen(") {
			out = append(out, g)
		}
	}
	return out
}

// listenerGoroutines counts the goroutines that run a Store's LISTEN
// connection.
func listenerGoroutines() int { return len(listenerStacks()) }

// TestCloseEndsTheListenConnection checks Close's promise to close the
// connections the Store opened itself for the LISTEN connection of
// waiting requests too: once Close returns, neither that connection nor
// the goroutine that holds it is left (but for the moment the server and
// the scheduler take to see them go), although a request watched a key a
// moment before (the listener would otherwise stay until it had heard
// nothing for watchset.Idle, 10 s, after the last waiter).
func TestCloseEndsTheListenConnection(t *testing.T) {
	app := testenv.RandomName("pgstore_listen_")
	pool := newPool(t, func(c *pgxpool.Config) { c.ConnConfig.RuntimeParams["application_name"] = app })
	s := newStore(t, pool)
	ctx := ctxT(t)
	other := newPool(t)
	listening := func() int {
		var n int
		if err := other.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := listenerGoroutines()

	k := key("watched")
	if r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour); err != nil || !r.Acquired {
		t.Fatalf("Claim: %+v %v", r, err)
	}
	settled, stop, err := s.Watch(ctx, k)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	// Watch waits for the LISTEN connection only up to
	// watchset.ReadyWait; on a loaded machine the connection may come
	// later, and Close must end it once it is open.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := listening()
		if n == 1 {
			break
		}
		if n > 1 || time.Now().After(deadline) {
			t.Fatalf("%d LISTEN connections while a request watches, want 1", n)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := listenersWithAConnection(); n > 0 {
		t.Errorf("%d listener goroutines still hold or open their connection after Close", n)
	}
	// A request still waiting is woken (it looks at the entry again, then
	// polls): it must not wait for a notification that no connection can
	// hear any more.
	select {
	case <-settled:
	case <-time.After(2 * time.Second):
		t.Error("a request waiting at Close was not woken")
	}
	stop()
	// The listener's last act is to tell Close it is done; it may still
	// be on its way out of its function, not yet scheduled, when the
	// stacks are read. So both it and the connection, which the server
	// takes a moment to see closed, are given a bound well under the
	// watchset.Idle (10 s) for which they stayed before Close ended them.
	const bound = 5 * time.Second
	deadline := time.Now().Add(bound)
	for n := listenerGoroutines(); n > before; n = listenerGoroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("%d listener goroutines %v after Close, %d before the watch", n, bound, before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for listening() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the Store's LISTEN connection is still open %v after Close returned", bound)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package pgstore_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
)

// listenerGoroutines counts the goroutines that run a Store's LISTEN
// connection.
func listenerGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "pgstore.(*watcher).listen(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestCloseEndsTheListenConnection checks Close's promise to close the
// connections the Store opened itself for the LISTEN connection of
// waiting requests too: once Close returns, neither that connection nor
// the goroutine that holds it is left, although a request watched a key
// a moment before (the listener would otherwise stay until it had heard
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
	if n := listening(); n != 1 {
		t.Fatalf("%d LISTEN connections while a request watches, want 1", n)
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
	// The goroutine told Close it was done just before it returns: give
	// it a moment to return, which the race detector's scheduling can
	// delay past this point (the count right after Close failed about one
	// run in five under -race).
	gone := time.Now().Add(time.Second)
	for n := listenerGoroutines(); n > before; n = listenerGoroutines() {
		if time.Now().After(gone) {
			t.Errorf("%d listener goroutines 1 s after Close, %d before the watch", n, before)
			break
		}
		time.Sleep(time.Millisecond)
	}
	// The server takes a moment to see the connection closed.
	deadline := time.Now().Add(2 * time.Second)
	for listening() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the Store's LISTEN connection is still open 2 s after Close returned")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package pgstore_test

import (
	"testing"
	"time"
)

// TestLeaseOnDatabaseClock: the lease is written and judged on the
// database server's clock. A claim's lease_until is 10s after the
// database's statement time; moved to one second in the database's past
// (as if the database clock had run on while the application's stood
// still), the lease is lapsed for Get and the next Claim takes over.
func TestLeaseOnDatabaseClock(t *testing.T) {
	pool := newPool(t)
	s := newStore(t, pool)
	ctx := ctxT(t)
	k := key("clock")
	r, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatal(r, err)
	}
	var left float64 // seconds, on the database clock
	err = pool.QueryRow(ctx, `SELECT extract(epoch FROM lease_until - statement_timestamp())::float8 FROM "`+s.Table()+`"
		WHERE scope = $1 AND key = $2`, k.Scope, k.Key).Scan(&left)
	if err != nil {
		t.Fatal(err)
	}
	if left <= 9 || left > 10 {
		t.Errorf("lease_until is %.3fs after the database's time, want just under 10s", left)
	}

	if _, err := pool.Exec(ctx, `UPDATE "`+s.Table()+`" SET lease_until = statement_timestamp() - interval '1 second'
		WHERE scope = $1 AND key = $2`, k.Scope, k.Key); err != nil {
		t.Fatal(err)
	}
	e, found, err := s.Get(ctx, k)
	if err != nil || !found {
		t.Fatalf("Get = %+v %v %v", e, found, err)
	}
	if e.LeaseRemaining > -900*time.Millisecond || e.LeaseRemaining < -5*time.Second {
		t.Errorf("LeaseRemaining = %v, want about -1s", e.LeaseRemaining)
	}
	r2, err := s.Claim(ctx, k, "fp", 10*time.Second, time.Hour)
	if err != nil || !r2.Acquired || !r2.TookOver || r2.Token <= r.Token {
		t.Errorf("Claim after the lease lapsed on the database clock = %+v, %v; want a takeover with a greater token than %d", r2, err, r.Token)
	}
}

package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// tableWrites are a table's update counters from pg_stat_user_tables.
type tableWrites struct{ updated, hot, dead int64 }

// writesOf returns table's counters once the work done on the one
// connection of pool is in the statistics: a backend publishes its counters
// when it goes idle at most once a second, unless told to at once.
func writesOf(tb testing.TB, pool *pgxpool.Pool, table string, wantUpdated int64) tableWrites {
	tb.Helper()
	ctx := ctxT(tb)
	var w tableWrites
	testenv.Eventually(tb, "the statistics count the updates", func() bool {
		if _, err := pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
			tb.Fatal(err)
		}
		err := pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd, n_dead_tup FROM pg_stat_user_tables WHERE relid = $1::text::regclass`,
			`"`+table+`"`).Scan(&w.updated, &w.hot, &w.dead)
		if err != nil {
			tb.Fatal(err)
		}
		return w.updated >= wantUpdated
	})
	return w
}

// TestCompletionUpdatesInPlace checks that completing a claim is a HOT
// update (no indexed column changes, the new version fits in its page), so
// that a first execution leaves no index entry behind and its dead row
// version is pruned with the page instead of waiting for VACUUM.
func TestCompletionUpdatesInPlace(t *testing.T) {
	pool := newPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	s := newStore(t, pool)
	ctx := ctxT(t)
	const n = 200
	for i := range n {
		k := idempotency.Key{Scope: "hot", Key: fmt.Sprint("k", i)}
		r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
		if err != nil || !r.Acquired {
			t.Fatal(r, err)
		}
		if err := s.Complete(ctx, k, r.Token, benchResponse, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	w := writesOf(t, pool, s.Table(), n)
	t.Logf("%d first executions: n_tup_upd %d, n_tup_hot_upd %d, n_dead_tup %d", n, w.updated, w.hot, w.dead)
	if w.updated != n || w.hot != n {
		t.Errorf("%d completions made %d updates, %d of them HOT; want all %d HOT", n, w.updated, w.hot, n)
	}
}

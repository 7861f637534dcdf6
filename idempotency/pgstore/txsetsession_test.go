package pgstore_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxHandlerSetsSession: a session setting that a handler changed
// through the request's transaction without LOCAL (SET, SET SESSION,
// RESET), committed with the request, stayed on the connection, back in
// the pool: the next request on it, of any handler, ran with the first
// one's search_path or statement_timeout, or without the pool's own
// (AfterConnect's). The connection of such a request is now closed rather
// than returned to the pool. A SET LOCAL ends with the transaction, and
// leaves the connection in the pool (a pin: the same session serves the
// next request).
func TestTxHandlerSetsSession(t *testing.T) {
	exec := func(sql string) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, sql)
			return err
		}
	}
	for _, c := range []struct {
		name    string
		set     func(context.Context, pgx.Tx) error
		setting string
		local   bool // the pin: the setting ends with the transaction
	}{
		{"SET statement_timeout", exec("SET statement_timeout = '4321ms'"), "statement_timeout", false},
		{"SET SESSION search_path", exec("SET SESSION search_path = pg_catalog, public"), "search_path", false},
		{"RESET of AfterConnect's setting", exec("RESET statement_timeout"), "statement_timeout", false},
		{"SET in a batch", func(ctx context.Context, tx pgx.Tx) error {
			b := &pgx.Batch{}
			b.Queue("SELECT 1")
			b.Queue("set search_path = pg_catalog, public")
			return tx.SendBatch(ctx, b).Close()
		}, "search_path", false},
		{"SET LOCAL", exec("SET LOCAL statement_timeout = '4321ms'"), "statement_timeout", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := newPool(t, func(cfg *pgxpool.Config) {
				cfg.MaxConns = 1
				cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
					_, err := conn.Exec(ctx, "SET statement_timeout = '7s'")
					return err
				}
			})
			s := newTxStore(t, pool)
			ctx := ctxT(t)
			var want string
			if err := pool.QueryRow(ctx, "SHOW "+c.setting).Scan(&want); err != nil {
				t.Fatal(err)
			}
			var got string
			var pids [2]int32
			h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tx, _ := pgstore.TxFromContext(r.Context())
				second := r.Header.Get(idempotency.HeaderIdempotencyKey) == "second"
				pid := &pids[0]
				if second {
					pid = &pids[1]
					if err := tx.QueryRow(r.Context(), "SHOW "+c.setting).Scan(&got); err != nil {
						t.Error(err)
					}
				} else if err := c.set(r.Context(), tx); err != nil {
					t.Errorf("the handler's %s: %v", c.name, err)
				}
				if err := tx.QueryRow(r.Context(), "SELECT pg_backend_pid()").Scan(pid); err != nil {
					t.Error(err)
				}
				w.WriteHeader(http.StatusCreated)
			}))
			for _, key := range []string{"first", "second"} {
				if w := postPayment(ctx, h, key); w.Code != http.StatusCreated {
					t.Fatalf("the %s request answered %d: %s", key, w.Code, w.Body)
				}
			}
			if got != want {
				t.Errorf("the next request on the pool ran with %s = %q; want the pool's %q", c.setting, got, want)
			}
			if c.local && pids[0] != pids[1] {
				t.Errorf("after a SET LOCAL, the next request ran on session %d, not %d: the connection was not returned to the pool", pids[1], pids[0])
			}
		})
	}
}

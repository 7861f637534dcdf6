package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxHandlerDeallocates: a handler's DEALLOCATE ALL drops the prepared
// statements of its connection, the transactional store's own among them
// (prepared once per connection in pgx's default exec mode), which pgx
// still counted on. The request's commit failed ("prepared statement does
// not exist") and so did every later request on that connection, which
// went back to the pool: the store was broken until it closed (the
// handler here deallocates on the connection's second request). Sent
// through the transaction, it is now followed at once by forgetting them
// on the pgx side, and they are prepared again on their next use: the
// request and the later ones succeed. Sent through Conn, which nothing
// sees, the request fails (nothing is committed, the retry runs), and the
// connection is closed rather than returned to the pool; a claim that
// finds its statements gone forgets them and claims again.
func TestTxHandlerDeallocates(t *testing.T) {
	for _, c := range []struct {
		name    string
		dealloc func(context.Context, pgx.Tx) error
		// firstFails: the request that deallocated fails (nothing kept).
		firstFails bool
		// cold: the handler deallocates on the connection's first request,
		// before the commit prepared its statements there; the next claim
		// finds its own gone.
		cold bool
	}{
		{"through the transaction", func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "DEALLOCATE ALL")
			return err
		}, false, false},
		{"through Query", func(ctx context.Context, tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "DEALLOCATE ALL", pgx.QueryExecModeSimpleProtocol)
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		}, false, false},
		{"through Conn", func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Conn().Exec(ctx, "DEALLOCATE ALL")
			return err
		}, true, false},
		{"through Conn, on the connection's first request", func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Conn().Exec(ctx, "DEALLOCATE ALL")
			return err
		}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := newPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 1 })
			s := newTxStore(t, pool)
			biz, ctx := bizTable(t, pool, s), ctxT(t)
			var runs atomic.Int64
			h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				tx, _ := pgstore.TxFromContext(r.Context())
				if _, err := tx.Exec(r.Context(), `INSERT INTO "`+biz+`" (id) VALUES ($1)`, fmt.Sprint("payment-", n)); err != nil {
					t.Error(err)
				}
				if n == 2 && !c.cold || n == 1 && c.cold {
					if err := c.dealloc(r.Context(), tx); err != nil {
						t.Errorf("the handler's DEALLOCATE ALL: %v", err)
					}
				}
				w.WriteHeader(http.StatusCreated)
			}))
			send := func(key string) *httptest.ResponseRecorder { return postPayment(ctx, h, key) }
			if w := send("warm"); !c.cold && w.Code != http.StatusCreated {
				t.Fatalf("the first request answered %d: %s", w.Code, w.Body)
			}
			first := send("deallocates")
			if c.firstFails {
				if first.Code != http.StatusServiceUnavailable {
					t.Errorf("the request that deallocated through Conn answered %d; want 503", first.Code)
				}
				if retry := send("deallocates"); retry.Code != http.StatusCreated {
					t.Errorf("its retry answered %d: %s; want 201", retry.Code, retry.Body)
				}
			} else if first.Code != http.StatusCreated {
				t.Errorf("the request that deallocated answered %d: %s; want 201", first.Code, first.Body)
			}
			for i := range 3 {
				if w := send(fmt.Sprint("later-", i)); w.Code != http.StatusCreated {
					t.Errorf("later request %d answered %d: %s; want 201", i, w.Code, w.Body)
				}
			}
			if replay := send("deallocates"); replay.Code != http.StatusCreated || replay.Header().Get(idempotency.HeaderReplayed) != "true" {
				t.Errorf("the replay answered %d (replayed %q); want 201 replayed", replay.Code, replay.Header().Get(idempotency.HeaderReplayed))
			}
			wantRuns, wantRows := int64(5), 5
			if c.firstFails {
				wantRuns, wantRows = 6, 5 // the deallocating run's write was rolled back
			}
			if n := bizRows(t, pool, biz); n != wantRows || runs.Load() != wantRuns {
				t.Errorf("%d business rows after %d runs; want %d rows and %d runs", n, runs.Load(), wantRows, wantRuns)
			}
		})
	}
}

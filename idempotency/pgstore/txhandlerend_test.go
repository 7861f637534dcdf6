package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestTxHandlerEndsTheBlock: a handler that sends COMMIT (or END) through
// the request's transaction ended the transaction block: its writes and
// the claim, still in progress, committed there, a write after it
// committed on its own, and the Middleware's completion ran outside any
// transaction: the request answered 201 and stored it, though the writes
// had not committed with the answer. The handler's statement now fails,
// naming the problem, and every later one is refused; the request is not
// answered a success, and the key is recorded as completed but not
// replayable (retries get 410: what was committed must not run again). A
// handler that sends ROLLBACK (or ABORT) rolled the claim back with its
// writes: its statement fails too, nothing is committed, and the retry
// runs it again.
func TestTxHandlerEndsTheBlock(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(ctx context.Context, tx pgx.Tx) error
		// committed: the statement committed the claim and the write
		// before it.
		committed bool
	}{
		{"COMMIT through Exec", func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "COMMIT")
			return err
		}, true},
		{"END through Query", func(ctx context.Context, tx pgx.Tx) error {
			rows, err := tx.Query(ctx, "END")
			if err != nil {
				return err
			}
			rows.Close()
			return rows.Err()
		}, true},
		{"ROLLBACK through Exec", func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "ROLLBACK")
			return err
		}, false},
	} {
		for _, answers500 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, answers 500 on the error %v", c.name, answers500), func(t *testing.T) {
				pool, s, biz, ctx := newBizTxStore(t)
				var runs atomic.Int64
				h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					n := runs.Add(1)
					tx, _ := pgstore.TxFromContext(r.Context())
					if _, err := tx.Exec(r.Context(), `INSERT INTO "`+biz+`" (id) VALUES ($1)`, fmt.Sprint("before-", n)); err != nil {
						t.Error(err)
					}
					if n == 1 {
						err := c.end(r.Context(), tx)
						if err == nil {
							t.Errorf("the handler's %s returned no error", c.name)
						}
						// The write after it is refused, not committed on its own.
						if _, err := tx.Exec(r.Context(), `INSERT INTO "`+biz+`" (id) VALUES ('after')`); err == nil {
							t.Errorf("a statement after the handler's %s succeeded", c.name)
						}
						if err != nil && answers500 {
							w.WriteHeader(http.StatusInternalServerError)
							return
						}
					}
					w.WriteHeader(http.StatusCreated)
				}))
				send := func() *httptest.ResponseRecorder { return postPayment(ctx, h, "handler-ends-block") }
				first := send()
				if first.Code < 500 {
					t.Errorf("the request whose handler sent %s answered %d; want an error (5xx)", c.name, first.Code)
				}
				if ct := first.Header().Get("Content-Type"); !answers500 && ct != "application/problem+json" {
					t.Errorf("the first answer's Content-Type = %q; want application/problem+json", ct)
				}
				if !answers500 {
					// The problem says what a retry gets: 410 when the claim
					// was committed and recorded as not replayable (it said
					// "a committed operation is replayed"), a new run when
					// nothing was committed.
					var p struct{ Detail string }
					if err := json.Unmarshal(first.Body.Bytes(), &p); err != nil {
						t.Fatal(err)
					}
					if says410 := strings.Contains(p.Detail, "410"); says410 != c.committed {
						t.Errorf("the first answer's detail is %q; want it to say that retries get 410: %v", p.Detail, c.committed)
					}
				}
				retry := send()
				switch {
				case c.committed:
					if runs.Load() != 1 || retry.Code != http.StatusGone {
						t.Errorf("the retry answered %d after %d runs; want 410 and one run: the first run's writes were committed", retry.Code, runs.Load())
					}
					if n := bizRows(t, pool, biz); n != 1 {
						t.Errorf("%d business rows; want 1, the write before the %s", n, c.name)
					}
				default:
					if runs.Load() != 2 || retry.Code != http.StatusCreated {
						t.Errorf("the retry answered %d after %d runs; want 201 and a second run: nothing of the first was committed", retry.Code, runs.Load())
					}
					if n := bizRows(t, pool, biz); n != 1 {
						t.Errorf("%d business rows; want 1, the second run's", n)
					}
				}
			})
		}
	}
}

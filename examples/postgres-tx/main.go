// Command postgres-tx is a transfer service whose writes and idempotency
// records commit in one PostgreSQL transaction (pgstore's transactional
// mode): a transfer and its stored answer become visible together or not at
// all, so a crash or a failed commit can never leave a transfer without its
// record (which a retry would run again) or a record without its transfer.
//
// Run it against a database (it creates its tables if needed):
//
//	go run ./examples/postgres-tx -db 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// Then move money, retry the same key (replayed, not run again), and look:
//
//	curl -i -X POST localhost:8083/transfers -H 'Idempotency-Key: t-1' -d '{"from":"alice","to":"bob","amount":250}'
//	curl -i -X POST localhost:8083/transfers -H 'Idempotency-Key: t-1' -d '{"from":"alice","to":"bob","amount":250}'
//	curl localhost:8083/accounts
//
// The handler writes only through the transaction from
// pgstore.TxFromContext, which is what makes the mode sound: every side
// effect is in the same database. A handler with external side effects
// (another API, e-mail, a message broker) must use lease mode (pgstore.New)
// instead.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/examples/internal/serve"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// The example's tables. The idempotency table is its own: pgstore's two
// modes must not share one table.
const (
	idemTable = "example_tx_idempotency"
	schema    = `
CREATE TABLE IF NOT EXISTS example_accounts (
	name    text PRIMARY KEY,
	balance bigint NOT NULL CHECK (balance >= 0)
);
CREATE TABLE IF NOT EXISTS example_transfers (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	from_name  text NOT NULL REFERENCES example_accounts (name),
	to_name    text NOT NULL REFERENCES example_accounts (name),
	amount     bigint NOT NULL CHECK (amount > 0),
	created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO example_accounts (name, balance) VALUES ('alice', 10000), ('bob', 10000)
ON CONFLICT (name) DO NOTHING;
`
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8083", "address to listen on")
	db := flag.String("db", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL")
	flag.Parse()
	serve.Main("postgres-tx", func(ctx context.Context) error { return run(ctx, *addr, *db, os.Stdout) })
}

// run serves until ctx is done, then shuts down gracefully: requests in
// flight are answered first. It prints one line with its URL to out once it
// listens.
func run(ctx context.Context, addr, dbURL string, out io.Writer) error {
	// Listen first, so that a bad -addr is reported before anything else.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	defer ln.Close() // Serve closes it too; this covers the early returns
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("-db: %w", err)
	}
	defer pool.Close()

	store := pgstore.NewTx(pool, pgstore.WithTable(idemTable))
	if err := store.CreateSchema(ctx); err != nil {
		return err
	}
	if err := createTables(ctx, pool); err != nil {
		return fmt.Errorf("create the example's tables: %w", err)
	}
	stopReaper := store.StartReaper(context.Background(), time.Minute)
	defer stopReaper()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	idem := idempotency.Middleware(store, // a TxStore: transactional mode
		idempotency.WithKeyRequired(true),
		idempotency.WithLogger(logger),
	)
	mux := http.NewServeMux()
	mux.Handle("POST /transfers", idem(http.HandlerFunc(transfer)))
	mux.HandleFunc("GET /accounts", func(w http.ResponseWriter, r *http.Request) { accounts(w, r, pool) })

	fmt.Fprintf(out, "postgres-tx: listening on http://%s (idempotency table %s, transactional mode)\n", ln.Addr(), idemTable)
	return serve.UntilDone(ctx, ln, mux)
}

type transferRequest struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// transfer moves money inside the middleware's transaction. It never commits
// or rolls back itself: the middleware commits the writes together with the
// stored answer, or rolls everything back on a 5xx.
func transfer(w http.ResponseWriter, r *http.Request) {
	tx, ok := pgstore.TxFromContext(r.Context())
	if !ok {
		problem(w, http.StatusInternalServerError, "the handler runs without a transaction")
		return
	}
	var in transferRequest
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.From == "" || in.To == "" || in.From == in.To || in.Amount <= 0 {
		problem(w, http.StatusBadRequest, `want {"from": name, "to": another name, "amount": > 0}`)
		return
	}
	ctx := r.Context()
	// Answer 4xx only before writing: a 4xx is a final answer, so the
	// middleware commits it with whatever the transaction holds.
	var known int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM example_accounts WHERE name IN ($1, $2)`, in.From, in.To).Scan(&known); err != nil {
		problem(w, http.StatusServiceUnavailable, "database error") // 5xx: rolled back, a retry runs again
		return
	}
	if known != 2 {
		problem(w, http.StatusNotFound, "unknown account")
		return
	}
	tag, err := tx.Exec(ctx, `UPDATE example_accounts SET balance = balance - $2 WHERE name = $1 AND balance >= $2`, in.From, in.Amount)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "database error")
		return
	}
	if tag.RowsAffected() == 0 {
		// Nothing was written yet. Not 409 (clients retry it) nor 422 (key
		// reused): 402 is final and replayed.
		problem(w, http.StatusPaymentRequired, "insufficient funds")
		return
	}
	if _, err := tx.Exec(ctx, `UPDATE example_accounts SET balance = balance + $2 WHERE name = $1`, in.To, in.Amount); err != nil {
		problem(w, http.StatusServiceUnavailable, "database error") // 5xx rolls the debit back
		return
	}
	var id int64
	var created time.Time
	err = tx.QueryRow(ctx, `INSERT INTO example_transfers (from_name, to_name, amount) VALUES ($1, $2, $3) RETURNING id, created_at`,
		in.From, in.To, in.Amount).Scan(&id, &created)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "database error")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/transfers/%d", id))
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "from": in.From, "to": in.To, "amount": in.Amount, "created": created})
}

func accounts(w http.ResponseWriter, r *http.Request, pool *pgxpool.Pool) {
	rows, err := pool.Query(r.Context(), `SELECT name, balance FROM example_accounts ORDER BY name`)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "database error")
		return
	}
	balances, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (map[string]any, error) {
		var name string
		var balance int64
		err := row.Scan(&name, &balance)
		return map[string]any{"name": name, "balance": balance}, err
	})
	if err != nil {
		problem(w, http.StatusServiceUnavailable, "database error")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(balances)
}

func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail})
}

// createTables creates the example's tables if needed. Concurrent CREATE
// TABLE IF NOT EXISTS of one table race in PostgreSQL (the loser fails
// with a unique_violation on pg_type), and instances may start together:
// one transaction holding an advisory lock makes them create the tables
// one after the other, as pgstore's CreateSchema does.
func createTables(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('saferetry/examples/postgres-tx', 0))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schema)
		return err
	})
}

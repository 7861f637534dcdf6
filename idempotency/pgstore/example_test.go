package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// The examples need a database, so they are compiled but not run.

// Lease mode: one shared store for every instance of the API.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	store := pgstore.New(pool)
	if err := store.CreateSchema(ctx); err != nil { // or apply pgstore.Schema with your migrations
		log.Fatal(err)
	}
	stop := store.StartReaper(ctx, time.Minute)
	defer stop()

	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})
	http.Handle("/orders", idempotency.Middleware(store)(orders))

	// At shutdown, after the server's Shutdown and before the pool closes
	// (deferred): the store's detached releases (claims made for callers
	// that left), then its renewals.
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := store.Drain(dctx); err != nil {
			log.Print(err)
		}
		_ = store.Close()
	}()
}

// Transactional mode: the handler writes through the transaction the
// middleware opened, so its writes and the stored response commit together.
func ExampleNewTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	store := pgstore.NewTx(pool, pgstore.WithLockTimeout(3*time.Second))
	if err := store.CreateSchema(ctx); err != nil {
		log.Fatal(err)
	}

	debit := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, ok := pgstore.TxFromContext(r.Context())
		if !ok {
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		}
		var balance int64
		err := tx.QueryRow(r.Context(),
			`UPDATE accounts SET balance = balance - 10 WHERE id = $1 RETURNING balance`, "acct_1").Scan(&balance)
		if err != nil {
			// A 5xx rolls the transaction back: nothing is stored, a retry runs again.
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"balance":%d}`, balance)
	})
	http.Handle("/debits", idempotency.Middleware(store)(debit))
}

func ExampleSchema() {
	sql, err := pgstore.Schema("billing.idempotency")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sql[:len("CREATE TABLE IF NOT EXISTS \"billing\".\"idempotency\"")])
	// Output: CREATE TABLE IF NOT EXISTS "billing"."idempotency"
}

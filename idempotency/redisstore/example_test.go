package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

// Example wires the middleware to Redis. It needs a Redis server, so it is
// compiled but not run by go test.
func Example() {
	opt, err := redis.ParseURL("redis://127.0.0.1:6379/0")
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()

	store := redisstore.New(rdb, redisstore.WithPrefix("payments:idem:"))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /payments", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintln(w, `{"status":"succeeded"}`)
	})
	srv := &http.Server{
		Addr:              ":8080",
		Handler:           idempotency.Middleware(store, idempotency.WithLease(5*time.Second))(mux),
		ReadHeaderTimeout: 5 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Fatal(err)
		}
	}()
	<-ctx.Done()

	// At shutdown: the server first, then the store's detached releases
	// (claims made for callers that left), then the client (deferred).
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Print(err)
	}
	if err := store.Drain(sctx); err != nil {
		log.Print(err)
	}
}

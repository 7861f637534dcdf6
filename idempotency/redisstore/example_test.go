package redisstore_test

import (
	"fmt"
	"log"
	"net/http"
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
	log.Fatal(srv.ListenAndServe())
}

// Command redis-server is an HTTP service made idempotent by
// idempotency.Middleware over a Redis store, so that several instances
// behind a load balancer agree on every Idempotency-Key. Its orders live in
// Redis too, so every instance sees the same list.
//
// Run two instances on one Redis:
//
//	go run ./examples/redis-server -addr 127.0.0.1:8081 -redis redis://127.0.0.1:6379/0 &
//	go run ./examples/redis-server -addr 127.0.0.1:8082 -redis redis://127.0.0.1:6379/0 &
//
// Create an order on the first, retry it on the second: the second replays
// the first one's answer (Idempotent-Replayed: true) and creates nothing.
//
//	curl -i -X POST localhost:8081/orders -H 'Idempotency-Key: order-1' -d '{"item":"book","quantity":2}'
//	curl -i -X POST localhost:8082/orders -H 'Idempotency-Key: order-1' -d '{"item":"book","quantity":2}'
//	curl localhost:8082/orders
//
// The same key with another body answers 422; a POST without a key 400.
// Stop an instance with Ctrl-C: it finishes the requests in flight first,
// then drains the store, then closes its Redis client.
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
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/examples/internal/serve"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "address to listen on")
	redisURL := flag.String("redis", "redis://127.0.0.1:6379/0", "Redis URL")
	prefix := flag.String("prefix", "saferetry-example:", "prefix of every Redis key this example writes")
	flag.Parse()
	serve.Main("redis-server", func(ctx context.Context) error { return run(ctx, *addr, *redisURL, *prefix, os.Stdout) })
}

// run serves until ctx is done, then shuts down gracefully: requests in
// flight are answered first. It prints one line with its URL to out once it
// listens.
func run(ctx context.Context, addr, redisURL, prefix string, out io.Writer) error {
	// Listen first, so that a bad -addr is reported before anything else.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	defer ln.Close() // Serve closes it too; this covers the early returns
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return fmt.Errorf("-redis: %w", err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("cannot reach redis at %s: %w", opt.Addr, err)
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	store := redisstore.New(rdb, redisstore.WithPrefix(prefix+"idem:"))
	idem := idempotency.Middleware(store,
		idempotency.WithKeyRequired(true),
		idempotency.WithTTL(24*time.Hour),
		idempotency.WithLease(10*time.Second),
		idempotency.WithLogger(logger),
	)

	o := &orders{rdb: rdb, prefix: prefix}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idem(http.HandlerFunc(o.create)))
	mux.HandleFunc("GET /orders", o.list)

	fmt.Fprintf(out, "redis-server: listening on http://%s (redis %s, prefix %q)\n", ln.Addr(), opt.Addr, prefix)
	err = serve.UntilDone(ctx, ln, mux)
	// The requests have ended, but on a client with ContextTimeoutEnabled
	// (opt.ContextTimeoutEnabled = true) a claim whose request left while
	// its script was on its way runs on: wait for it, and for the release
	// of the claim it made, before the deferred rdb.Close, which would
	// leave that key held until its lease lapsed.
	drainCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if derr := store.Drain(drainCtx); err == nil {
		err = derr
	}
	return err
}

// orders keeps orders in a Redis list shared by every instance.
type orders struct {
	rdb    *redis.Client
	prefix string
}

type order struct {
	ID       string `json:"id"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// create runs at most once per Idempotency-Key, whichever instance gets the
// request and however often the client retries.
func (o *orders) create(w http.ResponseWriter, r *http.Request) {
	var in order
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Item == "" || in.Quantity <= 0 {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintln(w, `{"type":"about:blank","title":"want {\"item\": non-empty, \"quantity\": > 0}","status":400}`)
		return
	}
	n, err := o.rdb.Incr(r.Context(), o.prefix+"order-seq").Result()
	if err != nil {
		// A 5xx stores nothing: the client's retry runs the handler again.
		http.Error(w, "cannot reach redis", http.StatusServiceUnavailable)
		return
	}
	in.ID = "ord_" + strconv.FormatInt(n, 10)
	b, _ := json.Marshal(in)
	if err := o.rdb.RPush(r.Context(), o.prefix+"orders", b).Err(); err != nil {
		http.Error(w, "cannot reach redis", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/orders/"+in.ID)
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(append(b, '\n'))
}

func (o *orders) list(w http.ResponseWriter, r *http.Request) {
	items, err := o.rdb.LRange(r.Context(), o.prefix+"orders", 0, -1).Result()
	if err != nil {
		http.Error(w, "cannot reach redis", http.StatusServiceUnavailable)
		return
	}
	out := make([]json.RawMessage, len(items))
	for i, s := range items {
		out[i] = json.RawMessage(s)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

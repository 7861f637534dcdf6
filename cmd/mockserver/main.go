// Command mockserver serves the saferetry mock payments API on a fixed
// address, for clients written in any language. It implements the safe-retry
// contract (Idempotency-Key required on POST /payments) and exposes fault
// injection and inspection under /_mock/ (see package mockserver).
//
// Usage:
//
//	go run ./cmd/mockserver -addr 127.0.0.1:8080
//	go run ./cmd/mockserver -store redis://127.0.0.1:6379/0
//	go run ./cmd/mockserver -store 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// Flags:
//
//	-addr         address to listen on (default 127.0.0.1:8080; port 0 picks one)
//	-store        memory (default), redis://... or rediss://..., postgres://... or postgresql://...
//	-mode         tx (default) or lease: the idempotency mode over a postgres store
//	-balance      CUR=amount, the opening balance of a currency in minor units (repeatable; default 1000000 each)
//	-unkeyed-payments  pay anew on every execution instead of keying payments by their derived key (the naive handler)
//	-payment-work      how long the handler works after paying, before it answers (default 0)
//	-ttl          how long a completed key is replayed (default 24h)
//	-lease        how long a claim lives without renewal (default 10s)
//	-wait         how long a duplicate waits for a running original before 409 (default 0: at once)
//	-namespace    idempotency scope prefix; instances sharing a store and a namespace share keys (default mockserver)
//	-table        PostgreSQL table of the entries, created if missing (default idempotency_entries; postgres store only)
//	-max-entries  most entries the memory store holds; a new key beyond gets 503 (default 1000000; memory store only)
//	-max-bytes    most bytes of heap the memory store's entries hold, as it estimates them (default 268435456; memory store only)
//	-v            log executions and injected faults to stderr
//
// The payments ledger lives where the idempotency entries do: in this
// process's memory with the memory store (one instance only), in the same
// Redis under the namespace's prefix, or in PostgreSQL tables named after
// the entries table (<table>_payments, <table>_balances). Processes that
// share a store and a namespace therefore share their payments: every
// instance answers GET /payments and GET /balance from the same records,
// and a payment is keyed by the derived key of its request, so a re-run
// after a takeover finds it and answers with it. Over PostgreSQL the
// default mode is transactional: the claim, the payment and the stored
// answer commit in one transaction; -mode lease runs lease mode, where the
// keyed ledger alone keeps a takeover from paying twice.
//
// With a redis:// store it checks the server's settings at start and prints
// a warning to stderr for each one under which Redis may forget claims and
// outcomes (an evicting maxmemory-policy, no persistence; see
// redisstore.Store.Check), then serves all the same.
//
// It prints one line with its URL once it accepts connections. SIGINT or
// SIGTERM stops it gracefully: no new connections, requests in flight are
// answered, then it exits. A second signal exits at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/pgledger"
	"github.com/saferetry/saferetry/mockserver/redisledger"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process the default way
	}()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// connectTimeout bounds reaching the store at start-up.
const connectTimeout = 5 * time.Second

// run serves until ctx is done, then shuts down gracefully.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mockserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (port 0 picks a free port)")
	storeURL := fs.String("store", "memory", "idempotency store: memory, redis://..., postgres://...")
	ttl := fs.Duration("ttl", idempotency.DefaultTTL, "how long a completed key is replayed")
	lease := fs.Duration("lease", idempotency.DefaultLease, "how long a claim lives without renewal")
	wait := fs.Duration("wait", 0, "how long a duplicate waits for a running original before 409 (0: at once)")
	namespace := fs.String("namespace", "mockserver", "idempotency scope prefix; instances sharing a store and a namespace share keys")
	table := fs.String("table", "", "PostgreSQL table of the entries, created if missing (default "+pgstore.DefaultTable+"; postgres store only)")
	maxEntries := fs.Int("max-entries", memstore.DefaultMaxEntries, "most entries the memory store holds; a new key beyond gets 503 (memory store only)")
	maxBytes := fs.Int64("max-bytes", memstore.DefaultMaxBytes, "most bytes of heap the memory store's entries hold, as it estimates them (memory store only)")
	mode := fs.String("mode", "", "idempotency mode over a postgres store: tx (default) or lease")
	balances := balanceFlag{}
	fs.Var(balances, "balance", "`CUR=amount`: opening balance of a currency in minor units (repeatable)")
	unkeyed := fs.Bool("unkeyed-payments", false, "pay anew on every execution (the naive handler a lease cannot protect)")
	work := fs.Duration("payment-work", 0, "how long the handler works after paying, before it answers (0: at once)")
	verbose := fs.Bool("v", false, "log executions and injected faults to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *mode == "" && isPostgres(*storeURL):
		*mode = "tx"
	case *mode == "":
		*mode = "lease"
	case *mode != "tx" && *mode != "lease":
		return fmt.Errorf("mockserver: -mode %q: want tx or lease", *mode)
	case *mode == "tx" && !isPostgres(*storeURL):
		return errors.New("mockserver: -mode tx needs a postgres:// store")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mockserver: unexpected arguments %q", fs.Args())
	}
	if *ttl <= 0 || *lease <= 0 || *wait < 0 || *work < 0 {
		return errors.New("mockserver: -ttl and -lease must be positive, -wait and -payment-work not negative")
	}

	var memoryOnly []string
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "max-entries" || f.Name == "max-bytes" {
			memoryOnly = append(memoryOnly, "-"+f.Name)
		}
	})
	if len(memoryOnly) > 0 && !isMemory(*storeURL) {
		return fmt.Errorf("mockserver: %s applies to the memory store only", strings.Join(memoryOnly, " and "))
	}
	if *maxEntries <= 0 || *maxBytes <= 0 {
		return errors.New("mockserver: -max-entries and -max-bytes must be positive")
	}

	if *table != "" {
		if !isPostgres(*storeURL) {
			return errors.New("mockserver: -table applies to a postgres:// store only")
		}
		if err := pgstore.ValidateTable(*table); err != nil {
			return fmt.Errorf("mockserver: -table: %w", err)
		}
	}

	be, err := openBackend(ctx, *storeURL, backendOptions{
		table:      *table,
		namespace:  *namespace,
		opening:    balances,
		tx:         *mode == "tx",
		maxEntries: *maxEntries,
		maxBytes:   *maxBytes,
		warnings:   stderr,
	})
	if err != nil {
		return err
	}
	defer be.close()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("mockserver: %w", err)
	}
	opts := []mockserver.Option{
		mockserver.WithListener(ln),
		mockserver.WithStore(be.store),
		mockserver.WithLedger(be.ledger),
		mockserver.WithNamespace(*namespace),
		mockserver.WithIdempotencyOptions(
			idempotency.WithTTL(*ttl),
			idempotency.WithLease(*lease),
			idempotency.WithWaitForResult(*wait),
		),
	}
	if *unkeyed {
		opts = append(opts, mockserver.WithUnkeyedPayments())
	}
	if *work > 0 {
		opts = append(opts, mockserver.WithPaymentWork(*work))
	}
	if *verbose {
		opts = append(opts, mockserver.WithLogger(slog.New(slog.NewTextHandler(stderr, nil))))
	}
	srv := mockserver.New(opts...)
	payments := "keyed payments"
	if *unkeyed {
		payments = "unkeyed payments"
	}
	fmt.Fprintf(stdout, "mockserver: listening on %s (store %s, mode %s, %s, ttl %v, lease %v)\n",
		srv.URL, be.name, *mode, payments, *ttl, *lease)

	<-ctx.Done()
	fmt.Fprintln(stdout, "mockserver: shutting down")
	srv.Close()
	return nil
}

func isMemory(u string) bool { return u == "" || u == "memory" }

func isPostgres(u string) bool {
	return strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://")
}

// backendOptions are the flags that shape the store and the ledger,
// already validated.
type backendOptions struct {
	table      string           // PostgreSQL only; "" for the default
	namespace  string           // names the Redis ledger's keys
	opening    map[string]int64 // opening balances
	tx         bool             // transactional mode (PostgreSQL only)
	maxEntries int              // memory only
	maxBytes   int64            // memory only
	warnings   io.Writer        // gets the warnings of the Redis settings check
}

// backend is where a server keeps its idempotency entries and its ledger.
type backend struct {
	store  idempotency.Store
	ledger mockserver.Ledger
	name   string
	close  func()
}

// openBackend connects to the store named by u and puts the ledger beside
// the entries, or makes the memory store and ledger.
func openBackend(ctx context.Context, u string, o backendOptions) (backend, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	switch {
	case isMemory(u):
		ms := memstore.New(memstore.WithMaxEntries(o.maxEntries), memstore.WithMaxBytes(o.maxBytes))
		return backend{store: ms, ledger: mockserver.NewMemoryLedger(o.opening), name: "memory",
			close: func() { _ = ms.Close() }}, nil

	case strings.HasPrefix(u, "redis://") || strings.HasPrefix(u, "rediss://"):
		opt, err := redis.ParseURL(u)
		if err != nil {
			return backend{}, fmt.Errorf("mockserver: -store: %w", err)
		}
		rdb := redis.NewClient(opt)
		if err := rdb.Ping(ctx).Err(); err != nil {
			_ = rdb.Close()
			return backend{}, fmt.Errorf("mockserver: cannot reach redis: %w", err)
		}
		prefix := "saferetry:mock:" + o.namespace + ":"
		if err := redisledger.ValidatePrefix(prefix); err != nil {
			_ = rdb.Close()
			return backend{}, fmt.Errorf("mockserver: -namespace %q cannot name a Redis ledger: %w", o.namespace, err)
		}
		rs := redisstore.New(rdb)
		warnRedisSettings(ctx, rs, o.warnings)
		led := redisledger.New(rdb, prefix, o.opening)
		return backend{store: rs, ledger: led, name: "redis " + opt.Addr, close: func() { _ = rdb.Close() }}, nil

	case isPostgres(u):
		pool, err := pgxpool.New(ctx, u)
		if err != nil {
			return backend{}, fmt.Errorf("mockserver: -store: %w", err)
		}
		var opts []pgstore.Option
		if o.table != "" {
			opts = append(opts, pgstore.WithTable(o.table))
		}
		tx := pgstore.NewTx(pool, opts...)
		led := pgledger.New(pool, tx.Table(), o.opening)
		for _, create := range []func(context.Context) error{tx.CreateSchema, led.CreateSchema} {
			if err := create(ctx); err != nil {
				pool.Close()
				return backend{}, fmt.Errorf("mockserver: cannot prepare postgres: %w", err)
			}
		}
		var st idempotency.Store = tx
		if !o.tx {
			st = tx.Store // lease mode over the same table
		}
		stopReaper := tx.StartReaper(context.Background(), time.Minute)
		return backend{store: st, ledger: led, name: "postgres table " + tx.Table(), close: func() {
			stopReaper()
			_ = tx.Close()
			pool.Close()
		}}, nil
	}
	return backend{}, fmt.Errorf("mockserver: -store %q: want memory, redis://... or postgres://...", u)
}

// balanceFlag collects -balance CUR=amount values.
type balanceFlag map[string]int64

func (b balanceFlag) String() string {
	parts := make([]string, 0, len(b))
	for c, v := range b {
		parts = append(parts, c+"="+strconv.FormatInt(v, 10))
	}
	return strings.Join(parts, ",")
}

func (b balanceFlag) Set(v string) error {
	cur, amount, ok := strings.Cut(v, "=")
	n, err := strconv.ParseInt(amount, 10, 64)
	if !ok || err != nil || n < 0 || len(cur) != 3 || strings.ToUpper(cur) != strings.ToUpper(strings.Map(letter, cur)) {
		return fmt.Errorf("want CUR=amount, three letters and a non-negative integer, got %q", v)
	}
	b[strings.ToUpper(cur)] = n
	return nil
}

// letter keeps ASCII letters and drops anything else.
func letter(r rune) rune {
	if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
		return r
	}
	return -1
}

// warnRedisSettings prints one warning line to w per setting of the Redis
// server under which it may forget claims and outcomes. The mock server
// serves all the same: it is a test tool, and a test Redis often runs
// without persistence on purpose.
func warnRedisSettings(ctx context.Context, rs *redisstore.Store, w io.Writer) {
	problems, err := rs.Check(ctx)
	if err != nil {
		fmt.Fprintf(w, "mockserver: warning: cannot check the redis settings: %v\n", err)
		return
	}
	for _, p := range problems {
		fmt.Fprintf(w, "mockserver: warning: redis %s\n", p)
	}
}

// Package mockcmd is the mock server command: its flags, its stores and
// ledgers, its metrics. cmd/mockserver and the mock subcommand of
// cmd/saferetry both run it, so the two serve the same server with the same
// flags. The flags are documented in cmd/mockserver.
package mockcmd

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
	"github.com/saferetry/saferetry/internal/cliflag"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/pgledger"
	"github.com/saferetry/saferetry/mockserver/redisledger"
)

// Main runs the command with args (without the program name) until SIGINT
// or SIGTERM, and returns its exit status: 0 after a graceful shutdown or
// -h, 2 when the flags are wrong or the store cannot be reached within
// -store-wait (the error printed to standard error). A second signal kills
// the process the default way. name is the command's name in its usage
// message.
func Main(name string, args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process the default way
	}()
	if err := Run(ctx, name, args, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// connectTimeout bounds each attempt to reach the store at start-up.
const connectTimeout = 5 * time.Second

// Run serves the mock server that args describe until ctx is done, then
// shuts it down gracefully: requests in flight are answered. It prints the
// startup line to stdout, and warnings and the failed attempts to reach the
// store within -store-wait to stderr. name is the command's name in its
// usage message. A -h in args returns flag.ErrHelp.
func Run(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	st, err := parseFlags(name, args, stderr)
	if err != nil {
		return err
	}
	be, err := openBackend(ctx, st.store, backendOptions{
		table:      st.table,
		namespace:  st.namespace,
		opening:    st.balances,
		tx:         st.mode == "tx",
		fastReplay: st.fastReplay,
		maxEntries: st.maxEntries,
		maxBytes:   st.maxBytes,
		wait:       st.storeWait,
		warnings:   stderr,
	})
	if err != nil {
		return err
	}
	defer be.close()
	var mt *metrics
	if st.metrics {
		if mt, err = newMetrics(st.namespace); err != nil {
			return err
		}
		defer mt.close()
	}

	ln, err := net.Listen("tcp", st.addr)
	if err != nil {
		return fmt.Errorf("mockserver: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	admin := st.admin.enabled(ln.Addr(), logger)
	srv := mockserver.New(st.serverOptions(be, ln, admin, logger, mt)...)
	payments := "keyed payments"
	if st.unkeyed {
		payments = "unkeyed payments"
	}
	adminState := "admin API off"
	if admin {
		adminState = "admin API on"
	}
	if mt != nil {
		adminState += ", metrics at " + mockserver.MetricsPath
	}
	adminState += ", OpenAPI at " + mockserver.OpenAPIPath
	mode := st.mode
	if st.fastReplay {
		mode += " with replay fast path"
	}
	fmt.Fprintf(stdout, "mockserver: listening on %s (store %s, mode %s, %s, ttl %v, lease %v, %s)\n",
		srv.URL, be.name, mode, payments, st.ttl, st.lease, adminState)

	<-ctx.Done()
	fmt.Fprintln(stdout, "mockserver: shutting down")
	srv.Close()
	return nil
}

// settings are the command's flags.
type settings struct {
	addr, store, namespace, table, mode string
	ttl, lease, wait, work, storeWait   time.Duration
	readTimeout, idleTimeout            time.Duration
	admin                               adminFlag
	maxEntries                          int
	maxBytes                            int64
	balances                            balanceFlag
	unkeyed, verbose, metrics           bool
	fastReplay                          bool
	memoryOnly                          []string // the memory-store flags given
}

// parseFlags parses and checks the command line. A command line that
// cliflag.Parse refuses is told as it tells it: once, with a hint, and a
// line pointing at -h, not with the whole usage.
func parseFlags(name string, args []string, stderr io.Writer) (settings, error) {
	st := settings{balances: balanceFlag{}}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage of %s: serves the mock payments API, its OpenAPI 3.1 description at GET %s, and the admin API under %s.\n",
			name, mockserver.OpenAPIPath, mockserver.AdminPrefix)
		fs.PrintDefaults()
	}
	fs.StringVar(&st.addr, "addr", "127.0.0.1:8080", "address to listen on (port 0 picks a free port)")
	fs.Var(&st.admin, "admin", "serve the admin API under /_mock/: auto (on a loopback address only), true or false")
	fs.DurationVar(&st.readTimeout, "read-timeout", mockserver.DefaultReadTimeout, "how long a request may take to arrive, headers and body (0: no limit on the body)")
	fs.DurationVar(&st.idleTimeout, "idle-timeout", mockserver.DefaultIdleTimeout, "how long an idle keep-alive connection stays open (0: no limit)")
	fs.StringVar(&st.store, "store", "memory", "idempotency store: memory, redis://..., postgres://...")
	fs.DurationVar(&st.storeWait, "store-wait", DefaultStoreWait, "how long to retry a redis or postgres store that cannot be reached at start, such as one starting beside it, with a line on stderr per attempt (0: fail at once); "+
		"the default leaves a database container time for its first start while a wrong address still fails within half a minute; a bad URL, a refused login or a missing database fail at once")
	fs.DurationVar(&st.ttl, "ttl", idempotency.DefaultTTL, "how long a completed key is replayed")
	fs.DurationVar(&st.lease, "lease", idempotency.DefaultLease, "how long a claim lives without renewal")
	fs.DurationVar(&st.wait, "wait", 0, "how long a duplicate waits for a running original before 409 (0: at once)")
	fs.StringVar(&st.namespace, "namespace", "mockserver", "idempotency scope prefix, not empty; instances sharing a store and a namespace share keys and payments")
	fs.StringVar(&st.table, "table", "", "PostgreSQL table of the entries, created if missing (default "+pgstore.DefaultTable+"; postgres store only)")
	fs.IntVar(&st.maxEntries, "max-entries", memstore.DefaultMaxEntries, "most entries the memory store holds; a new key beyond gets 503 (memory store only)")
	fs.Int64Var(&st.maxBytes, "max-bytes", memstore.DefaultMaxBytes, "most bytes of heap the memory store's entries hold, as it estimates them (memory store only)")
	fs.StringVar(&st.mode, "mode", "", "idempotency mode over a postgres store: tx (default) or lease")
	fs.Var(st.balances, "balance", "`CUR=amount`: opening balance of a currency in minor units (repeatable)")
	fs.BoolVar(&st.fastReplay, "replay-fast-path", false, "read a completed key with a plain read before every claim, not only while replays are most of the claims (the default): a replay costs one read, a first execution one round trip more (redis or postgres)")
	fs.BoolVar(&st.unkeyed, "unkeyed-payments", false, "pay anew on every execution (the naive handler a lease cannot protect)")
	fs.DurationVar(&st.work, "payment-work", 0, "how long the handler works after paying, before it answers (0: at once)")
	fs.BoolVar(&st.metrics, "metrics", false, "serve Prometheus text of the idempotency metrics at "+mockserver.MetricsPath)
	fs.BoolVar(&st.verbose, "v", false, "log executions and injected faults to stderr")
	if err := cliflag.Parse(fs, args); err != nil {
		return st, err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "max-entries" || f.Name == "max-bytes" {
			st.memoryOnly = append(st.memoryOnly, "-"+f.Name)
		}
	})
	return st, st.check()
}

// check refuses flags that do not fit together, and sets the default mode.
func (st *settings) check() error {
	if st.namespace == "" {
		// mockserver.WithNamespace("") would scope the keys as the default
		// namespace does, while the Redis ledger's prefix and the metrics'
		// scope are built from the flag: one process would share its keys
		// with the default namespace but not its payments. An empty value
		// is more likely an unset variable than a wish to join the default
		// namespace, so it is refused rather than mapped to it.
		return errors.New("mockserver: -namespace must not be empty (leave the flag out for the default, mockserver)")
	}
	switch {
	case st.mode == "" && isPostgres(st.store):
		st.mode = "tx"
	case st.mode == "":
		st.mode = "lease"
	case st.mode != "tx" && st.mode != "lease":
		return fmt.Errorf("mockserver: -mode %q: want tx or lease", st.mode)
	case st.mode == "tx" && !isPostgres(st.store):
		return errors.New("mockserver: -mode tx needs a postgres:// store")
	}
	if st.fastReplay && isMemory(st.store) {
		return errors.New("mockserver: -replay-fast-path applies to a redis:// or postgres:// store")
	}
	if st.ttl <= 0 || st.lease <= 0 || st.wait < 0 || st.work < 0 || st.storeWait < 0 {
		return errors.New("mockserver: -ttl and -lease must be positive, -wait, -payment-work and -store-wait not negative")
	}
	if st.readTimeout < 0 || st.idleTimeout < 0 {
		return errors.New("mockserver: -read-timeout and -idle-timeout must not be negative (0: no limit)")
	}
	if len(st.memoryOnly) > 0 && !isMemory(st.store) {
		return fmt.Errorf("mockserver: %s applies to the memory store only", strings.Join(st.memoryOnly, " and "))
	}
	if st.maxEntries <= 0 || st.maxBytes <= 0 {
		return errors.New("mockserver: -max-entries and -max-bytes must be positive")
	}
	if st.table != "" {
		if !isPostgres(st.store) {
			return errors.New("mockserver: -table applies to a postgres:// store only")
		}
		if err := pgstore.ValidateTable(st.table); err != nil {
			return fmt.Errorf("mockserver: -table: %w", err)
		}
	}
	return nil
}

// serverOptions are the mockserver options the settings ask for; log is
// the server's logger with -v, mt the instrumentation of -metrics (nil
// without).
func (st settings) serverOptions(be backend, ln net.Listener, admin bool, log *slog.Logger, mt *metrics) []mockserver.Option {
	opts := []mockserver.Option{
		mockserver.WithListener(ln),
		mockserver.WithAdminAPI(admin),
		mockserver.WithReadTimeout(st.readTimeout),
		mockserver.WithIdleTimeout(st.idleTimeout),
		mockserver.WithStore(be.store),
		mockserver.WithLedger(be.ledger),
		mockserver.WithNamespace(st.namespace),
		mockserver.WithIdempotencyOptions(
			idempotency.WithTTL(st.ttl),
			idempotency.WithLease(st.lease),
			idempotency.WithWaitForResult(st.wait),
		),
	}
	if st.unkeyed {
		opts = append(opts, mockserver.WithUnkeyedPayments())
	}
	if st.work > 0 {
		opts = append(opts, mockserver.WithPaymentWork(st.work))
	}
	if st.verbose {
		opts = append(opts, mockserver.WithLogger(log))
	}
	if mt != nil {
		opts = append(opts, mt.options(be.store, be.kind)...) // its WithStore wraps the one above
	}
	return opts
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
	fastReplay bool             // the stores' WithReplayFastPath
	maxEntries int              // memory only
	maxBytes   int64            // memory only
	wait       time.Duration    // how long to retry a store not reachable yet (waitForStore)
	warnings   io.Writer        // gets the failed attempts and the warnings of the Redis settings check
}

// backend is where a server keeps its idempotency entries and its ledger.
type backend struct {
	store  idempotency.Store
	ledger mockserver.Ledger
	name   string
	kind   string // memory, redis or postgres: the store's name in the metrics
	close  func()
}

// openBackend connects to the store named by u and puts the ledger beside
// the entries, or makes the memory store and ledger. It retries a store
// not reachable yet within o.wait (waitForStore); a bad URL or namespace
// fails before any attempt.
func openBackend(ctx context.Context, u string, o backendOptions) (backend, error) {
	switch {
	case isMemory(u):
		ms := memstore.New(memstore.WithMaxEntries(o.maxEntries), memstore.WithMaxBytes(o.maxBytes))
		return backend{store: ms, ledger: mockserver.NewMemoryLedger(o.opening), name: "memory", kind: "memory",
			close: func() { _ = ms.Close() }}, nil

	case strings.HasPrefix(u, "redis://") || strings.HasPrefix(u, "rediss://"):
		opt, err := redis.ParseURL(u)
		if err != nil {
			return backend{}, fmt.Errorf("mockserver: -store: %w", err)
		}
		prefix := "saferetry:mock:" + o.namespace + ":"
		if err := redisledger.ValidatePrefix(prefix); err != nil {
			return backend{}, fmt.Errorf("mockserver: -namespace %q cannot name a Redis ledger: %w", o.namespace, err)
		}
		// The attempts dial once and send their Ping once: go-redis would
		// otherwise retry a refused dial and then the command by itself
		// (about 1.7 s), so that an attempt cut short by its timeout
		// reported the deadline instead of the refusal, and the first one
		// could take the whole wait. waitForStore does the retrying.
		probe := *opt
		probe.DialerRetries, probe.MaxRetries = 1, -1
		err = waitForStore(ctx, o.wait, o.warnings, func(ctx context.Context) error {
			// A dial of its own first: go-redis logs every failed dial
			// on the process's standard error, a second line per attempt
			// beside waitForStore's.
			var d net.Dialer
			conn, err := d.DialContext(ctx, probe.Network, probe.Addr)
			if err != nil {
				return fmt.Errorf("mockserver: cannot reach redis: %w", err)
			}
			if probe.TLSConfig != nil {
				err = refusePlainRedis(ctx, conn, func(ctx context.Context) (net.Conn, error) {
					return d.DialContext(ctx, probe.Network, probe.Addr)
				}, probe.TLSConfig)
			}
			_ = conn.Close()
			if err != nil {
				return err
			}
			// A client per attempt: after as many failed dials as its pool
			// has connections, a go-redis client fails fast with its last
			// dial error and dials again once a second only.
			c := redis.NewClient(&probe)
			// go-redis bounds a read by ctx's deadline but does not heed
			// its cancellation: closing the client cuts a Ping that a
			// server accepting connections does not answer as soon as
			// the command is interrupted.
			stop := context.AfterFunc(ctx, func() { _ = c.Close() })
			err = c.Ping(ctx).Err()
			if !stop() {
				// Closed by the AfterFunc: the attempt's time ran out (or
				// a signal came), which is its error, not the closed
				// connection the Ping met, nor a Ping that just succeeded.
				err = ctx.Err()
			}
			_ = c.Close()
			if err != nil {
				return fmt.Errorf("mockserver: cannot reach redis: %w", err)
			}
			return nil
		})
		if err != nil {
			return backend{}, err
		}
		// The server's client keeps go-redis's retries, which ride out a
		// Redis restart while it serves.
		rdb := redis.NewClient(opt)
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		err = refuseCluster(cctx, rdb)
		cancel()
		if err != nil {
			_ = rdb.Close()
			return backend{}, err
		}
		var opts []redisstore.Option
		if o.fastReplay {
			opts = append(opts, redisstore.WithReplayFastPath())
		}
		rs := redisstore.New(rdb, opts...)
		cctx, cancel = context.WithTimeout(ctx, connectTimeout)
		warnRedisSettings(cctx, rs, o.warnings)
		cancel()
		led := redisledger.New(rdb, prefix, o.opening)
		return backend{store: rs, ledger: led, name: "redis " + opt.Addr, kind: "redis", close: func() {
			drain(rs.Drain)
			_ = rdb.Close()
		}}, nil

	case isPostgres(u):
		pool, err := pgxpool.New(ctx, u)
		if err != nil {
			return backend{}, fmt.Errorf("mockserver: -store: %w", err)
		}
		var opts []pgstore.Option
		if o.table != "" {
			opts = append(opts, pgstore.WithTable(o.table))
		}
		if o.fastReplay {
			opts = append(opts, pgstore.WithReplayFastPath())
		}
		tx := pgstore.NewTx(pool, opts...)
		led := pgledger.New(pool, tx.Table(), o.opening)
		err = waitForStore(ctx, o.wait, o.warnings, func(ctx context.Context) error {
			// Both are created if missing, so a retry after a cut between
			// them is harmless.
			for _, create := range []func(context.Context) error{tx.CreateSchema, led.CreateSchema} {
				if err := create(ctx); err != nil {
					return fmt.Errorf("mockserver: cannot prepare postgres: %w", err)
				}
			}
			return nil
		})
		if err != nil {
			pool.Close()
			return backend{}, err
		}
		var st idempotency.Store = tx
		if !o.tx {
			st = tx.Store // lease mode over the same table
		}
		stopReaper := tx.StartReaper(context.Background(), time.Minute)
		return backend{store: st, ledger: led, name: "postgres table " + tx.Table(), kind: "postgres", close: func() {
			drain(tx.Drain)
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

// refuseCluster returns an error when rdb's server is a node of a Redis
// Cluster: the command's client talks to that one node, which answers
// MOVED for every key that another node holds, so most requests would
// fail. A server whose INFO cannot be read (a managed Redis may rename
// the command) is not refused.
func refuseCluster(ctx context.Context, rdb *redis.Client) error {
	info, err := rdb.Info(ctx, "cluster").Result()
	if err != nil || !strings.Contains(info, "cluster_enabled:1") {
		return nil
	}
	return fmt.Errorf("mockserver: -store: redis at %s runs in cluster mode (a node of a Redis Cluster), and -store takes a standalone Redis "+
		"(in Go, redisstore and redisledger work over a redis.ClusterClient)", rdb.Options().Addr)
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

// drainTimeout bounds how long closing a backend waits for its store's
// Claims that went on after their callers left (see drain).
const drainTimeout = 5 * time.Second

// drain waits, for up to drainTimeout, for a store's Claims whose callers
// left to release the claims they made, before the backend closes the
// client or pool those releases need (the stores' Drain).
func drain(d func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	_ = d(ctx)
}

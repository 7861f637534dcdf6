package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/tcpproxy"
	"github.com/saferetry/saferetry/mockserver"
)

// opening is the balance of every currency the runs pay in: large enough
// never to run out.
const opening int64 = 1_000_000_000_000

// currencies are those the runs pay in, spread over the operations: one
// balance row would serialise every payment of transactional mode, whose
// transaction holds the row's lock until it commits.
var currencies = func() []string {
	var cs []string
	for _, a := range "ABCD" {
		for _, b := range "ABCDEFGH" {
			cs = append(cs, "X"+string(a)+string(b))
		}
	}
	return cs
}()

// paymentWork is the time the handler takes after paying and before it
// answers, as a real one calling a downstream service would: an instance
// that dies in that time has paid but not recorded its answer. Under
// ScenarioRenew it takes one and a half leases instead.
const paymentWork = 50 * time.Millisecond

// Settle-time bounds.
const (
	settlePatience = 2 * time.Minute // the final round of retries
	replayPatience = time.Minute     // the replay of every answered operation
	readPatience   = time.Minute     // reading the ledger
	readRetry      = 200 * time.Millisecond
)

// runCell sets a cell's service up, drives its operations under its
// faults, heals it, retries what is open, replays every answered
// operation, reads the verdict, and takes everything down again, on every
// path.
func runCell(ctx context.Context, cfg Config, cell Cell, logf func(string, ...any)) (res Result) {
	res.Cell = cell
	begin := time.Now()
	defer func() { res.Took = time.Since(begin) }()
	run := "chaos-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	dir := filepath.Join(cfg.Dir, run)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		res.Err = err
		return res
	}
	c := &cluster{admin: &http.Client{Timeout: 2 * time.Second}, lease: cfg.Lease, logf: logf}
	defer c.close()
	storeArgs, err := c.prepareStore(ctx, cfg, cell.Store, dir)
	if err != nil {
		res.Err = err
		return res
	}
	mode := []string{"-mode", cell.Mode}
	switch cell.Mode {
	case ModeFastPath:
		mode = []string{"-mode", "lease", "-replay-fast-path"}
	case ModeTxFastPath:
		mode = []string{"-mode", "tx", "-replay-fast-path"}
	}
	work := paymentWork
	if cell.Scenario == ScenarioRenew {
		work = cfg.Lease * 3 / 2
	}
	args := append(append([]string{"-namespace", run, "-lease", cfg.Lease.String(), "-ttl", "1h",
		"-payment-work", work.String()}, mode...), storeArgs...)
	for _, c := range currencies {
		args = append(args, "-balance", c+"="+strconv.FormatInt(opening, 10))
	}
	if cell.Unkeyed {
		args = append(args, "-unkeyed-payments")
	}
	if err := c.startInstances(ctx, cfg.MockServer, dir, args); err != nil {
		res.Err = err
		return res
	}

	ops := newOps(cfg.Ops, run)
	l := newLoader(c.addrs, cfg.Lease)
	l.progress = logf
	defer l.close()
	faultCtx, stopFaults := context.WithCancel(ctx)
	faults := c.run(faultCtx, cell.Scenario)
	l.drive(ctx, ops, cfg.Workers, cfg.MinDuration, 0.25)
	stopFaults()
	faults.Wait()
	faultsEnded := time.Now()
	res.Faults, res.FaultCount = c.fired.String(), c.fired.total()
	healErr := c.heal(ctx)
	l.settle(ctx, ops, cfg.Workers, settlePatience)
	if lapses(cell.Scenario) {
		// A stale holder, resumed by the last pause or freed by the last
		// store fault, completes within moments: the replay comes after.
		_ = clock.Sleep(ctx, clock.Real, time.Until(faultsEnded.Add(cfg.Lease/2)))
	}
	l.replay(ctx, ops, cfg.Workers, replayPatience)

	payments, balances, err := readLedger(ctx, c.addrs[0])
	if err != nil {
		res.Err = errors.Join(healErr, err)
		return res
	}
	res.Verdict = judge(ops, payments, opening, balances)
	res.Err = healErr
	procs := c.instances
	if c.redis != nil {
		procs = append(procs[:len(procs):len(procs)], c.redis)
	}
	for _, in := range procs {
		if in.exited() {
			res.Err = errors.Join(res.Err, fmt.Errorf("chaos: %s exited on its own (see %s)", in.name, in.log))
		}
	}
	return res
}

// prepareStore starts the cell's store (a Redis of the suite's own, or a
// proxy to PostgreSQL with tables of the run's own) and returns the
// instances' flags that name it.
func (c *cluster) prepareStore(ctx context.Context, cfg Config, store, dir string) ([]string, error) {
	switch store {
	case "redis":
		rs, addr, err := redisServer(cfg.RedisServer, dir)
		if err != nil {
			return nil, err
		}
		if err := rs.start(ctx); err != nil {
			return nil, fmt.Errorf("chaos: could not start its own redis-server: %w", err)
		}
		c.cleanups = append(c.cleanups, func() { rs.kill() })
		c.redis = rs
		return []string{"-store", "redis://" + addr + "/0"}, nil
	case "postgres":
		if cfg.PostgresURL == "" {
			return nil, fmt.Errorf("chaos: no PostgreSQL URL (set SAFERETRY_POSTGRES_URL): %w", errSkipped)
		}
		target, err := hostPort(cfg.PostgresURL)
		if err != nil {
			return nil, err
		}
		table := "chaos_" + strconv.FormatInt(time.Now().UnixNano()%1e12, 36)
		c.cleanups = append(c.cleanups, func() { dropTables(cfg.PostgresURL, table, c.logf) })
		p, err := tcpproxy.Listen(target)
		if err != nil {
			return nil, err
		}
		c.cleanups = append(c.cleanups, p.Stop)
		c.proxy = p
		u, _ := url.Parse(cfg.PostgresURL)
		u.Host = p.Addr()
		q := u.Query()
		q.Set("pool_max_conns", "16") // each instance serves a third of the clients
		u.RawQuery = q.Encode()
		return []string{"-store", u.String(), "-table", table}, nil
	}
	return nil, fmt.Errorf("chaos: unknown store %q", store)
}

// startInstances starts the three mockserver instances.
func (c *cluster) startInstances(ctx context.Context, bin, dir string, args []string) error {
	for i := range 3 {
		in, addr, err := mockServer(bin, dir, "mockserver-"+strconv.Itoa(i), args)
		if err != nil {
			return err
		}
		if err := in.start(ctx); err != nil {
			return err
		}
		c.cleanups = append(c.cleanups, func() { in.kill() })
		c.instances = append(c.instances, in)
		c.addrs = append(c.addrs, addr)
	}
	c.busy = make([]sync.Mutex, len(c.instances))
	return nil
}

// close takes down what the cell set up, last first.
func (c *cluster) close() {
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i]()
	}
}

// readLedger reads every payment and every balance from an instance: the
// shared ledger, which every instance answers from. The two come from one
// moment: it reads the balances before and after the payments, again
// until both reads agree, for a payment that lands in between (a handler
// of an instance resumed after a pause) would be in the balances and not
// in the payments; balances that did not move mean that no payment came
// in between, since each takes one down. A read that fails with
// a 503, without an answer or with one cut short is sent again every
// readRetry, within readPatience: a store fault of the cell may have cut
// the instance's connection to the ledger a moment before (its pool opens
// a new one for the next read), and reading is safe to repeat.
func readLedger(ctx context.Context, addr string) ([]mockserver.Payment, map[string]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, readPatience)
	defer cancel()
	once := func(path string, into any) (retry bool, err error) {
		status, err := callJSON(ctx, http.DefaultClient, http.MethodGet, "http://"+addr+path, into)
		var netErr net.Error
		switch {
		case err == nil:
			return false, nil
		case status == 0: // no answer: the instance may be restarting
			return true, err
		case status != http.StatusOK:
			return status == http.StatusServiceUnavailable, err
		}
		return errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &netErr), err // the answer was cut short
	}
	get := func(path string, into any) error {
		for {
			retry, err := once(path, into)
			if !retry {
				return err
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(readRetry):
			}
		}
	}
	type balanceBody struct {
		Balances map[string]int64 `json:"balances"`
	}
	var before balanceBody
	if err := get("/balance", &before); err != nil {
		return nil, nil, fmt.Errorf("chaos: reading the balances: %w", err)
	}
	for {
		var payments []mockserver.Payment
		if err := get("/payments", &payments); err != nil {
			return nil, nil, fmt.Errorf("chaos: reading the ledger: %w", err)
		}
		var after balanceBody
		if err := get("/balance", &after); err != nil {
			return nil, nil, fmt.Errorf("chaos: reading the balances: %w", err)
		}
		if maps.Equal(before.Balances, after.Balances) {
			return payments, after.Balances, nil
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("chaos: the ledger kept changing while it was read for %v: %w", readPatience, ctx.Err())
		}
		before = after
	}
}

// hostPort returns the host:port of a PostgreSQL URL, which must be a
// loopback address: the suite cuts and slows the connections to it.
func hostPort(pgURL string) (string, error) {
	cfg, err := pgx.ParseConfig(pgURL)
	if err != nil {
		return "", fmt.Errorf("chaos: PostgreSQL URL: %w", err)
	}
	if !isLoopback(cfg.Host) {
		return "", fmt.Errorf("chaos: PostgreSQL at %q is not on a loopback address; the suite only talks to this machine", cfg.Host)
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), nil
}

// isLoopback reports whether host names this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// dropTables removes the run's tables: the idempotency entries and the
// ledger's.
func dropTables(pgURL, table string, logf func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		logf("chaos: could not drop the tables of %s: %v", table, err)
		return
	}
	defer conn.Close(ctx)
	for _, t := range []string{table, table + "_payments", table + "_balances"} {
		if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{t}.Sanitize()); err != nil {
			logf("chaos: dropping %s: %v", t, err)
		}
	}
}

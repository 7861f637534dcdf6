// Package chaos proves the reference server's exactly-once guarantee under
// faults, with real processes: three cmd/mockserver instances share one
// store (a Redis of the suite's own, or the shared PostgreSQL behind a TCP
// proxy of the suite's own), a client pool pays through the saferetry
// client, round robin over the instances and with parallel duplicates of
// the same key, while the suite kills (SIGKILL) and restarts instances,
// pauses them (SIGSTOP) past their lease, kills and restarts Redis (which
// runs with appendfsync always), cuts and slows the PostgreSQL
// connections, and makes the servers drop answers after commit and fail
// with 503. After a final round of retries with the same keys, and one
// more send of every answered operation (a replay, which must name the
// payment its client was given), it reads the verdict from the servers'
// shared ledger: per operation, how many payments, and whether each holds
// the amount, currency and recipient the operation asked for; which
// answers the client got that the ledger does not hold; which operations
// were answered, after a payment, with an older one (a stale holder
// overwrote the stored answer); which are still unresolved, and which were
// refused (a final 400 or 402, which no operation of the suite calls
// for); whether the balance adds up.
//
// It measures, and does not assume: a cell whose handler pays without a
// key (mockserver.WithUnkeyedPayments, lease mode) shows what a lease alone
// gives when a side effect lives outside the store.
//
// The suite talks only to loopback addresses and processes it started,
// bounds its run time, and removes its processes, tables and Redis data on
// every path. Run it with cmd/chaos.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// ModeFastPath is lease mode with the stores' replay fast path
// (cmd/mockserver -replay-fast-path): a replay reads a completed entry
// without the claim.
const ModeFastPath = "fastpath"

// ModeTxFastPath is transactional mode (PostgreSQL only) with the replay
// fast path (cmd/mockserver -mode tx -replay-fast-path): a replay reads a
// completed entry without the claim batch, and begins no transaction.
const ModeTxFastPath = "txfastpath"

// Cell is one configuration of the service under test.
type Cell struct {
	// Store is "redis" or "postgres".
	Store string
	// Mode is "lease", "tx" (PostgreSQL only), ModeFastPath or
	// ModeTxFastPath (PostgreSQL only).
	Mode string
	// Unkeyed runs the naive handler: a payment per execution.
	Unkeyed bool
	// Scenario is one of Scenarios, or ScenarioRenew.
	Scenario string
}

// Handler names the cell's payment handler in tables.
func (c Cell) Handler() string {
	if c.Unkeyed {
		return "unkeyed"
	}
	return "keyed"
}

// Config is one run of the suite.
type Config struct {
	// MockServer is the path of a built cmd/mockserver binary.
	MockServer string
	// RedisServer is the path of redis-server; "" looks it up in PATH.
	RedisServer string
	// PostgresURL is the shared PostgreSQL the postgres cells use; the
	// suite makes tables of its own there and drops them.
	PostgresURL string
	// Dir holds the run's logs and Redis data; the caller removes it.
	Dir string
	// Cells are run one after another.
	Cells []Cell
	// Ops is the number of operations per cell.
	Ops int
	// MinDuration spreads each cell's operations over at least this long,
	// so that its faults have time to fire; 0 sends them as fast as the
	// workers go.
	MinDuration time.Duration
	// Workers is the number of concurrent clients.
	Workers int
	// Lease is the servers' lease (-lease).
	Lease time.Duration
	// Log gets progress lines; nil discards them.
	Log io.Writer
}

// Result is the outcome of one cell.
type Result struct {
	Cell
	Verdict
	// Faults lists the faults fired, as "kill=3 pause=2".
	Faults string
	// FaultCount is their total.
	FaultCount int
	// Took is the cell's duration, set-up and final round included.
	Took time.Duration
	// Err is set when the cell could not run to its verdict.
	Err error
}

// OK reports whether the cell ran, fired at least one fault, and its
// verdict is clean. An unkeyed cell is allowed its doubles, which are what
// it measures, under a scenario whose faults let leases lapse; under one
// whose faults do not (ScenarioMock, ScenarioRenew), a double is a lease
// that did not hold while its holder lived and reached the store. A cell
// that fired no fault (its operations were done before the first was due)
// ran without faults: its ledger says nothing of exactly-once under them.
func (r Result) OK() bool {
	if r.Err != nil || r.FaultCount == 0 {
		return false
	}
	v := r.Verdict
	if r.Unkeyed && lapses(r.Scenario) {
		v.Doubles = 0
	}
	return v.Clean()
}

// Run runs every cell of cfg and returns their results; it stops early
// only when ctx ends.
func Run(ctx context.Context, cfg Config) []Result {
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	var results []Result
	for i, cell := range cfg.Cells {
		if ctx.Err() != nil {
			break
		}
		logf("chaos: cell %d/%d: %s %s %s %s, %d operations", i+1, len(cfg.Cells), cell.Store, cell.Mode, cell.Handler(), cell.Scenario, cfg.Ops)
		r := runCell(ctx, cfg, cell, logf)
		if r.Err != nil {
			logf("chaos: cell failed: %v", r.Err)
		}
		logf("chaos: cell done: %d operations, %d payments, faults %s: %d doubles, %d lost, %d unresolved, %d refused, %d overwritten, %v",
			r.Ops, r.Payments, r.Faults, r.Doubles, r.Lost, r.Unresolved, r.Refused, r.Overwritten, r.Took.Round(time.Second))
		results = append(results, r)
	}
	return results
}

// errSkipped marks a cell whose service is not available.
var errSkipped = errors.New("skipped")

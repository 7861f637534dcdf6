// Command mockserver serves the saferetry mock payments API on a fixed
// address, for clients written in any language. It implements the safe-retry
// contract (Idempotency-Key required on POST /payments), describes itself
// in OpenAPI 3.1 at GET /openapi.json (the payments API, the
// Idempotency-Key parameter, the problem responses and the x-idempotency
// policy, with the -ttl and -wait given), and exposes fault injection and
// inspection under /_mock/ (see package mockserver).
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
//	-admin        auto (default), true or false: serve the admin API under /_mock/; auto serves it on a loopback address only
//	-read-timeout how long a request may take to arrive, headers and body (default 10s; 0: no limit on the body)
//	-idle-timeout how long an idle keep-alive connection stays open (default 60s; 0: no limit)
//	-store        memory (default), redis://... or rediss://... (a standalone Redis, not a Redis Cluster node), postgres://... or postgresql://...
//	-store-wait   how long to retry a redis or postgres store that cannot be reached at start (default 30s; 0: fail at once)
//	-mode         tx (default) or lease: the idempotency mode over a postgres store
//	-balance      CUR=amount, the opening balance of a currency in minor units (repeatable; default 1000000 each)
//	-unkeyed-payments  pay anew on every execution instead of keying payments by their derived key (the naive handler)
//	-payment-work      how long the handler works after paying, before it answers (default 0)
//	-ttl          how long a completed key is replayed (default 24h)
//	-lease        how long a claim lives without renewal (default 10s)
//	-wait         how long a duplicate waits for a running original before 409 (default 0: at once)
//	-namespace    idempotency scope prefix, not empty; instances sharing a store and a namespace share keys and payments (default mockserver)
//	-table        PostgreSQL table of the entries, created if missing (default idempotency_entries; postgres store only)
//	-max-entries  most entries the memory store holds; a new key beyond gets 503 (default 1000000; memory store only)
//	-max-bytes    most bytes of heap the memory store's entries hold, as it estimates them (default 268435456; memory store only)
//	-replay-fast-path  read a completed key with a plain read before every claim, not only while replays are most of the claims (redis or postgres store only)
//	-metrics      serve Prometheus text of the idempotency metrics at /metrics
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
// ledger belongs to the -table, not to the namespace: processes on one
// -table share payments and balances whatever their -namespace, so
// /_mock/keys of one counts the payments that another namespace made
// under the same Idempotency-Key, and a reset by one empties the ledger of
// all; give each namespace a -table of its own to keep them apart (over
// Redis the namespace alone does). Over PostgreSQL the
// default mode is transactional: the claim, the payment and the stored
// answer commit in one transaction; -mode lease runs lease mode, where the
// keyed ledger alone keeps a takeover from paying twice.
//
// A redis or postgres store that cannot be reached at start, or that cuts
// the connection while the tables are created, is tried again for up to
// -store-wait, after pauses from 100 ms doubling to 1 s, with one line on
// stderr per failed attempt; each attempt may take up to 5 s. This covers a
// database started beside the mock server (docker-compose, a CI service)
// or restarted with it. When the wait is over it exits with status 2 and
// the last error. What waiting cannot cure fails at once: a bad URL, a
// refused login, a database or role that does not exist, a server
// certificate that fails verification, a -namespace or -table refused by
// validation, a Redis Cluster node (the command talks to one Redis; a
// node of a cluster would answer MOVED for most keys), a connection
// pooler in front of PostgreSQL with pgx's default exec mode. Through
// PgBouncer in transaction mode, add default_query_exec_mode=exec to the
// postgres URL: the default mode, a statement cache, breaks there and is
// refused (see pgstore's "Exec modes and connection poolers").
//
// With a redis:// store it checks the server's settings at start and prints
// a warning to stderr for each one under which Redis may forget claims and
// outcomes (an evicting maxmemory-policy, no persistence; see
// redisstore.Store.Check), then serves all the same.
//
// Anyone who can reach the port can use the API, and with the admin API
// inject faults and read every key and payment. On an address that is not
// loopback (0.0.0.0, a LAN address) it logs a warning, and serves the admin
// API only when -admin (or -admin=true) asks for it, with a second
// warning; paths under /_mock/ are then 404 problems. -admin=false turns
// the admin API off on any address.
//
// With -metrics it measures its idempotency middleware with the
// otelidempotency instruments and serves them, through the OpenTelemetry
// Prometheus exporter, as Prometheus text at GET /metrics:
// saferetry_server_requests_total by saferetry_outcome (new, replay,
// in_progress, mismatch, missing_key, ...), the request, handler and store
// call durations, active claims and waiters, takeovers, and
// saferetry_server_retries_total with the namespace as saferetry_scope.
// A client under test shows its retries, replays and conflicts there in
// numbers. Failures injected with /_mock/fail are answered before the
// middleware and are not counted there; GET /_mock/keys/{key} lists them.
// Without -metrics, /metrics is a 404 problem like any unknown path.
//
// A command line it refuses is told on stderr in one line, with a hint for
// the usual mistakes (a boolean flag takes its value after "=", as in
// -admin=false; a duration needs a unit, as in -ttl 5s), and a line that
// points at -h, which prints the flags; it then exits with status 2.
//
// It prints one line with its URL once it accepts connections. SIGINT or
// SIGTERM stops it gracefully: no new connections, requests in flight are
// answered, then it exits. A second signal exits at once.
package main

import (
	"context"
	"io"
	"os"

	"github.com/saferetry/saferetry/internal/mockcmd"
)

func main() { os.Exit(mockcmd.Main("mockserver", os.Args[1:])) }

// run is the command without its signal handling, for the tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return mockcmd.Run(ctx, "mockserver", args, stdout, stderr)
}

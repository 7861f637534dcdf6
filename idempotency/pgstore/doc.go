// Package pgstore keeps idempotency entries in PostgreSQL, so that every
// instance of an application shares one atomic claim per (scope, key).
//
// It offers two modes over the same table.
//
// # Lease mode
//
// New returns a *Store implementing idempotency.Store. A claim is one row,
// reserved with a single INSERT ... ON CONFLICT (scope, key) DO UPDATE
// statement whose WHERE clause only overwrites an expired row or takes over an
// in-progress row whose lease lapsed and whose fingerprint matches. Fencing
// tokens come from the table's identity sequence, so they grow across
// takeovers and releases. Leases and expiry are computed from the database
// server's clock (statement_timestamp()), never the application's. Completion,
// renewal and release update or delete the row only when the caller's token is
// still the row's token, otherwise they return idempotency.ErrStaleToken.
//
// A first execution costs two round trips (Claim, Complete) and a replay one
// (Claim answers with the stored outcome); the claim statement is read-only
// when a completed or live entry is in the way. An acquired claim answers
// how much of its lease is left on the database clock after any wait for a
// row lock, so that the middleware does not start a handler on a claim
// that may have lapsed. A Claim whose context ends while its statement is
// in flight returns then, and leaves the statement to its answer (waited
// for at most the lease), releasing the claim it got, rather than leave
// the key held, for every retry a 409, until its lease lapses. That
// release needs the pool: at shutdown, call Store.Drain, which waits for
// such statements, after the server's Shutdown and before Close and the
// pool's Close.
//
// Once at least 96 % of a window of 64 claims acquired their key (a load
// of first executions, as a payments API mostly serves), a claim begins
// with the upsert alone: the claim statement's INSERT ... ON CONFLICT DO
// UPDATE, without the union that returns the row in the way, which costs
// about what the INSERT of a hand-written table does. It acquires in one
// round trip whatever the claim statement would acquire, a takeover
// included (so that a store slow enough for a second round trip to eat
// half the lease still lets a lapsed claim be taken over). Like the claim
// statement, it leaves a row that its snapshot shows in the way without
// a lock or a write, returns nothing, and the claim statement runs, which
// answers with that row: a replay, a conflict or a mismatch then costs
// one round trip more. The store goes back to the claim statement alone
// once fewer than 90 % of a window's claims acquired (a replay answered by
// the replay fast path counts as one that did not). The answers are the
// same on both paths.
//
// # The replay fast path
//
// The claim statement costs the database about twice a primary-key SELECT
// even when it writes nothing. Reading a completed entry with such a
// SELECT first, and running the claim statement only when there is none,
// makes a replay cost a SELECT and a first execution three round trips.
// The Store chooses per window of 64 claims (internal/replaymix): once at
// least 60 % of a window's claims found a completed entry (a storm of
// retries, or a client replaying on purpose), the next claims read first;
// under 50 % they go back to the claim statement alone. A new Store starts
// on the claim statement, so the usual mix, where replays are rare, keeps
// two round trips per first execution. A transactional claim made under
// idempotency.ProbeContext (a look at a key, rolled back, not a request's
// claim) is counted in no window, here or below. WithReplayFastPath reads first
// always, WithoutReplayFastPath never, in lease mode and in transactional
// mode alike. Reading a completed entry without the claim is safe because
// nothing changes it before it expires:
// Complete, Renew, Release and the claim's upsert only touch an entry in
// progress or an expired one, and the SELECT only returns an entry that has
// not expired at its own statement time. So either path gives the same
// answer in every state, and the choice changes what a claim costs, never
// what it answers.
//
// # Keeping leases under load and latency
//
// Renewals run on connections of the Store's own (WithRenewalConns: two
// kept open by default, more while those are busy, opened at the first
// renewal and closed by Close), outside the pool given to New: a burst of
// requests, or the handlers' own queries on that pool, never makes a
// renewal wait for a connection. They are never pinged before use and
// Renew uses pgx.QueryExecModeExec, so a renewal is one round trip; a
// renewal that finds its connection ended by the server or the network
// closes them all (they most likely ended together, as in a restart or a
// failover), so that the next renewal opens a fresh one. In the
// pool given to New, Claim and Get (the request path) hold at most three
// quarters of the connections at once, so that Complete and Release, which
// record outcomes, find one free of the Store's own waiters; whatever else
// shares the pool (the handlers' queries) competes for that quarter too.
// Size the pool for the requests in flight plus that quarter.
//
// # Waiting requests: LISTEN/NOTIFY
//
// The Store implements idempotency.Watcher. A request waiting for an entry
// (idempotency.WithWaitForResult) marks its row watched; the complete and
// release statements then send a NOTIFY, in the same round trip, which a
// LISTEN connection of the Store's own (opened while somebody waits on this
// instance, outside the pool, and closed by Close) turns into wake-ups. Rows nobody waits for
// send no notification, which keeps NOTIFY, and the lock it takes at
// commit, off the usual path. While somebody waits, the LISTEN connection
// pings the server after every 10 s without a notification; one that does
// not answer within 2 s (it died without a reset, as behind a NAT or
// firewall that forgot it, or with a partitioned server) is replaced by a
// new one, whose start wakes every waiter to look again; until then they
// poll once a second.
//
// # Bytes
//
// Scope, key and fingerprint are text columns: valid UTF-8 without NUL is
// kept as it is, anything else as an escaped form (the byte 0x01, then the
// bytes in hex) that no string kept as it is can take, so rows written by
// earlier versions keep matching, except a row whose scope starts with that
// byte (a key is printable ASCII, a fingerprint hex): it is not found
// again, and its key runs anew. Scope and key together form the primary
// key, whose btree entry PostgreSQL limits to about 2,700 bytes after
// compression: a scope of over about 2,600 bytes of text, or 1,300 bytes
// that are not UTF-8 (escaped, each takes two), may be refused as too long
// (SQLSTATE 54000), and the Middleware answers 503 for every claim in it.
// Keep scopes short (a tenant's ID, not a token; hash a long one in
// WithScope). The database must be encoded in UTF-8 (SHOW server_encoding
// says UTF8): in another encoding, a scope with a character that encoding
// lacks fails every claim (SQLSTATE 22P05), and the Middleware answers 503
// for every request in it. Headers are kept byte for byte in header_bin
// (bytea), bodies in body (bytea); the JSON header column of earlier
// versions is still read. A response too large for the database (body,
// header, scope and key over about 1 GB together, PostgreSQL's limit on a
// value and on a protocol message; over about 512 MB in
// pgx.QueryExecModeExec and pgx.QueryExecModeSimpleProtocol, which send a
// bytea as hex text) is refused before it is sent, and one the database
// refuses for its size is reported likewise, as
// idempotency.ErrResponseNotStorable: the Middleware then records the
// operation as completed but not replayable (410 to retries), in
// transactional mode in the request's transaction, with the handler's
// writes.
//
// # Transactional mode
//
// NewTx returns a *TxStore implementing idempotency.TxStore. The middleware
// then opens one transaction per protected request, claims the key inside
// it, hands the transaction to the handler (TxFromContext), stores the
// response in it and commits: the business writes and the idempotency
// record become visible together, or not at all. A 5xx, a panic or a failed
// commit rolls everything back and leaves the key free. No lease is needed:
// a crashed instance's connection drops, PostgreSQL rolls its transaction
// back, and the key is free at once. That needs the connection's end to
// reach the server: when the instance's host dies or the network to it is
// cut, nothing tells PostgreSQL, and the transaction, with the key, stays
// held (its duplicates answered in progress) until the server's TCP
// keepalive ends the session (tcp_keepalives_idle, _interval and _count;
// the system's default is two hours of silence) or
// idle_in_transaction_session_timeout does (set it above the longest a
// handler keeps its transaction idle). A concurrent duplicate blocks on the
// uncommitted row (each wait bounded by the lock timeout, WithLockTimeout,
// or by nine tenths of the session's statement_timeout when that is
// shorter, so once for every transaction it finds holding the key) and then
// replays the committed outcome, acquires the key if the first transaction
// rolled back, or reports the operation in progress when the wait times
// out. The same holds, for shorter, when a client leaves while the handler's
// statement runs: pgx's default context handling closes the connection,
// but PostgreSQL notices only when the statement next reads or writes the
// socket, so the statement runs to its end and the key stays held (409 to
// a retry) until then; client_connection_check_interval (PostgreSQL 14 and
// later) or pgx's CancelRequestContextWatcherHandler ends it sooner.
//
// A first execution costs two round trips, both pgx batches: the claim,
// which begins the transaction, and the stored outcome with COMMIT. A
// replay (or a request in progress, or another payload) costs one, the
// claim batch, and leaves no transaction to roll back. The claim runs
// before BEGIN, in the implicit transaction PostgreSQL opens for the
// statements of one batch (up to the Sync of the extended protocol, or
// the one query string that pgx.QueryExecModeSimpleProtocol sends a batch
// as); BEGIN, queued after it, turns that into the transaction block the
// handler continues. When the claim is not acquired, a statement queued
// before BEGIN fails on purpose (an invalid integer cast of a text that
// says so), so that BEGIN never runs and the implicit transaction rolls
// back at the end of the batch: the server log shows that error (SQLSTATE
// 22P02) for every such claim, every replay included, and pgx reports the
// batch failed to a tracer (ConnConfig.Tracer). With the extended protocol
// the logged statement is the failing one alone, without parameters (unless
// log_parameter_max_length_on_error is set); with
// pgx.QueryExecModeSimpleProtocol it is the whole batch, pgx having quoted
// the scope, key and fingerprint into it.
//
// Those counts hold in pgx's default mode, QueryExecModeExec and
// QueryExecModeSimpleProtocol. pgx forgets what it knew of the statements
// of a batch that failed, which costs nothing in the default mode (the
// claim batch's statements are prepared on each connection under names of
// their own) but, in QueryExecModeCacheDescribe, one round trip more for the
// claim batch after a claim that was not acquired on the same connection,
// to describe its statements again: then a first execution costs three, a
// replay two. QueryExecModeDescribeExec describes every batch (two round
// trips each). A session that does not default to read committed (the
// claim batch fails on its first statement, also logged), or that defaults
// to read only (the claim fails; a handler's SET SESSION CHARACTERISTICS
// committed with its request may have left its connection so), begins the
// transaction in a round trip of its own, READ COMMITTED and READ WRITE,
// and claims inside it, so that the handler always runs at read committed:
// four round trips for a first execution, and four for a replay (the
// transaction is rolled back).
//
// Those are the counts of the claim path. The replay fast path (see above)
// applies to transactional mode too: while it reads first, a completed
// entry is answered by the primary-key SELECT on the transaction's
// connection, in one round trip in every session (two in
// QueryExecModeDescribeExec, which describes every statement before it
// runs it), without the claim batch: no transaction is begun and nothing
// is logged. A completed
// entry is committed with the handler's writes and nothing changes it
// before it expires, so the read answers as the claim batch would;
// anything else (absent, in progress, expired) goes on to the claim batch,
// a first execution then taking one round trip more than above.
//
// The other way round, once at least 96 % of a window of 64 claims
// acquired their key (a load of first executions, as a payments API
// mostly serves), the claim batch is the INSERT of the key (ON CONFLICT DO
// NOTHING) followed by BEGIN alone: a first execution's claim then costs
// about what the INSERT of a hand-written table does. A claim that finds a
// row inserts nothing, logs nothing, and takes one round trip more:
// ROLLBACK, then the claim batch above, which decides (and fails as above
// when it does not acquire; in QueryExecModeCacheDescribe one more, as
// above). The store goes back to the claim batch alone once fewer than
// 90 % of a window's claims acquired. The answers are the same on both
// paths.
//
// Choose transactional mode when every side effect of the handler is a
// write to the same PostgreSQL database, made through the transaction from
// TxFromContext: it is then exactly-once without leases or half-done work.
// Do not choose it when the handler has external side effects (payments
// through another API, e-mails, messages to a broker, writes to another
// database): those cannot be rolled back with the transaction, so a
// rollback after they happened lets a retry repeat them. Use lease mode
// there, and make the external calls idempotent themselves. Transactional
// mode also holds a database connection and a row lock for the whole
// handler, and a waiting duplicate holds a connection for up to the lock
// timeout for each transaction it finds holding the key (a holder that
// rolls back hands the key to the next waiting claim), so keep such
// handlers short and size the pool for the requests in flight. Do not mix
// both modes on one table: a lease-mode Claim would wait without a lock
// timeout behind an uncommitted transactional claim.
//
// # Exec modes and connection poolers
//
// Every statement casts its parameters to their types in the SQL, so
// the Store works in every pgx QueryExecMode (CacheStatement, pgx's
// default, CacheDescribe, DescribeExec, Exec, SimpleProtocol), in lease
// and in transactional mode.
//
// Behind a transaction pooler (PgBouncer with pool_mode=transaction, and
// poolers like it) a client's statements go to whichever server
// connection is free, one transaction at a time, and two modes break:
//
//   - CacheStatement prepares named statements on a server connection and
//     runs them later on another: `prepared statement "stmtcache_..."
//     already exists` (SQLSTATE 42P05) or does not exist, from the first
//     statement on (CreateSchema already).
//   - DescribeExec prepares the unnamed statement in one round trip and
//     binds it in the next, which the pooler may send to a server
//     connection where another client's unnamed statement waits: `bind
//     message supplies 8 parameters, but prepared statement "" requires
//     5`, or, with as many parameters, the wrong statement runs.
//
// The Store refuses both there (see WithPooler): once, before its first
// statement (CreateSchema, Claim, Get, BeginTx, DeleteExpired, Watch), a
// Store whose pool uses one of them asks a connection for its server
// process id; a pooler answers cancel requests itself, so the process id
// the connection announced at start-up is the pooler's, not the server's.
// When they differ every one of those methods returns an *ExecModeError
// (errors.Is ErrUnsafeExecMode) instead of running a statement. That tells
// a pooler from none, not session pooling from transaction pooling:
// declare a session-mode pooler with WithPooler(PoolerSession), and
// PgBouncer 1.21 or later with max_prepared_statements set with
// WithPooler(PoolerTransactionPrepared). In the other modes the pool is
// not probed; the LISTEN connection is, in every mode (see below).
//
// With PgBouncer in transaction mode, set the pool's mode to
// pgx.QueryExecModeExec (default_query_exec_mode=exec in the URL; one
// round trip per statement, parameters typed by the casts) or
// pgx.QueryExecModeSimpleProtocol (values quoted into the SQL by pgx);
// QueryExecModeCacheDescribe works too (at a round trip more per claim
// after a replay in transactional mode, see above). On PgBouncer 1.21 or later,
// max_prepared_statements (for example 200) makes the default mode work.
// Give the Store's LISTEN connection a direct connection with
// WithListenConfig: PgBouncer drops the notifications of a LISTEN made
// through it in transaction mode ("got packet 'A' from server when not
// linked"), and a Store that detects a pooler does not listen through it
// (its waiters then poll). Lease renewals always use
// pgx.QueryExecModeExec and work through any pooler.
//
// # Schema and cleanup
//
// CreateSchema creates the table, its identity sequence and an index on
// expires_at, and adds the columns a table made by an earlier version lacks
// (safe to call repeatedly and concurrently); Schema returns the same SQL
// for migration tools. Expired rows are treated as absent at once and
// are deleted in bounded batches through the expires_at index by
// DeleteExpired, or in the background by StartReaper.
//
// A row is kept for its ttl and at most a thousandth of it longer (a
// second at the most, so a second with the default 24 h): a claim expires
// that slack after its ttl, and Complete keeps that expiry when it is
// within the slack of the one asked for, as it is when the handler took
// less than the slack. Completing then changes no indexed column, so PostgreSQL updates
// the row in place (a HOT update, counted in pg_stat_user_tables'
// n_tup_hot_upd): a first execution adds no index entry besides its
// claim's, and the row version it replaces is pruned with its page rather
// than left for VACUUM.
package pgstore

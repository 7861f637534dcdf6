package pgstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/detach"
	"github.com/saferetry/saferetry/internal/gate"
	"github.com/saferetry/saferetry/internal/headercodec"
	"github.com/saferetry/saferetry/internal/pgtext"
	"github.com/saferetry/saferetry/internal/replaymix"
	"github.com/saferetry/saferetry/internal/watchset"
)

var _ idempotency.Store = (*Store)(nil)

// errNoAnswer is returned when the claim statement kept racing with
// concurrent writers; it should never happen in practice.
var errNoAnswer = errors.New("pgstore: claim: no answer after retries")

// claimAttempts bounds how often Claim re-runs its statement when a
// concurrent writer changed the row between the statement's snapshot and its
// insert (the statement then returns no row).
const claimAttempts = 5

// Store is an idempotency.Store kept in one PostgreSQL table (lease mode).
// Create it with New; the zero value is not usable. It is safe for concurrent
// use by multiple goroutines and by multiple processes sharing the database.
// Most callers create it once, call CreateSchema at start-up (or apply Schema
// with their migration tool), start a reaper with StartReaper and hand it to
// idempotency.Middleware; at shutdown, they call Drain, then Close, before
// closing the pool.
type Store struct {
	pool  *pgxpool.Pool
	cfg   config
	names names
	sql   statements
	gate  gate.Gate
	watch watcher
	renew renewals
	check *PoolCheck
	// textArgs reports that the pool's exec mode sends arguments as text,
	// a bytea as two hex digits a byte (see checkOutcomeSize).
	textArgs bool
	// replay chooses Claim's path: the completed statement first, or the
	// claim statement straight away (see replayEnter).
	replay *replaymix.Mix
	// upserts counts the claims that acquired the key (a Mix counts any
	// share of claims): while at least firstsEnter of a window's did,
	// Claim begins with the upsert statement, which only inserts or takes
	// over, until fewer than firstsLeave do. A claim that does not acquire
	// then costs a round trip more: the claim statement, which answers
	// with the row in the way.
	upserts *replaymix.Mix
	// detached counts Claim's statements that run on a goroutine of their
	// own (see acquire), for Drain.
	detached detach.Group
	// headers decodes the stored headers of the entries that Claim reads
	// first (completedEntry): replays of a handful of header sets share
	// one http.Header each, which the Store contract allows for Claim's
	// answer (read-only), not for Get's.
	headers *headercodec.Shared
}

// The shares of claims that acquired the key at which a store begins its
// claims with a statement that only inserts (or takes over), and under
// which it stops (see Store.upserts and TxStore.firsts): 62 of a window's
// 64, and 58.
const (
	firstsEnter = 0.96
	firstsLeave = 0.9
)

// replayEnter and replayLeave are the shares of replays among the claims
// of a window at which the default Store starts and stops reading a key
// before claiming it. Reading first saves a replay about two thirds of a
// SELECT (the claim statement costs 1.2 to 2 times one, BENCHMARKS.md) and
// costs a first execution one SELECT that finds nothing, so it pays from
// about 60 % of replays on.
const (
	replayEnter = 0.6
	replayLeave = 0.5
)

// statements are the SQL texts, built once with the table name.
type statements struct {
	claim, upsert, get, completed, renew, complete, release, watch, deleteExpired string
	// Transactional mode's own (see tx.go); txClaimNew and txInsert have
	// the $BOUND placeholder that NewTx fills in.
	txClaim, txClaimNew, txInsert, txAcquired, txComplete, txHeld string
	// txWait and txWaitRow are Tx.claimCommitted's, txLeft
	// Tx.rollbackChecked's.
	txWait, txWaitRow, txLeft string
}

// New returns a Store over pool, which must not be nil; the Store does not
// close pool. It does not touch the database; call CreateSchema (or apply
// Schema) before use. New panics when pool is nil or the WithTable name is
// invalid (see ValidateTable): both are programming errors.
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	if pool == nil {
		panic("pgstore: New called with a nil pool")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.lockTimeout <= 0 {
		cfg.lockTimeout = DefaultLockTimeout
	}
	if cfg.reapBatch <= 0 {
		cfg.reapBatch = DefaultReapBatch
	}
	n, err := newNames(cfg.table)
	if err != nil {
		panic(err.Error())
	}
	s := &Store{pool: pool, cfg: cfg, names: n, sql: buildStatements(n.table),
		replay:  replaymix.New(cfg.replayPath, replayEnter, replayLeave),
		upserts: replaymix.New(replaymix.Adaptive, firstsEnter, firstsLeave),
		headers: headercodec.NewShared()}
	s.gate = gate.New(int(pool.Config().MaxConns))
	mode := pool.Config().ConnConfig.DefaultQueryExecMode
	s.check = NewPoolCheck(pool, cfg.pooler)
	s.textArgs = mode == pgx.QueryExecModeExec || mode == pgx.QueryExecModeSimpleProtocol
	s.watch.store, s.watch.idle, s.watch.pingWait = s, watchset.Idle, watchset.PingWait
	return s
}

// Table returns the table name the store uses: the WithTable name, or
// DefaultTable when none was given.
func (s *Store) Table() string { return s.cfg.table }

// expirySlackSQL is how much longer than its ttl a row may be kept: a
// thousandth of the ttl, at most a second ($TTL is the statement's ttl
// parameter, in microseconds). A claim expires that much after its ttl,
// and Complete keeps the claim's expiry when it falls within [ttl, ttl +
// slack] from now, as it does when the handler took less than the slack
// and both calls had the same ttl. The completion then changes no indexed
// column (expires_at is indexed for the reaper), so PostgreSQL updates the
// row in place (a HOT update): no new index entries, and the old version
// is pruned with its page, without VACUUM. The slack is proportional so
// that a short ttl (a test's, a checker's) stays exact to within a
// thousandth; with the default 24 h it is the full second.
const expirySlackSQL = `LEAST(interval '1 second', $TTL::bigint * interval '1 microsecond' / 1000)`

const leaseRemainingUS = `CASE WHEN state = 1 THEN (extract(epoch FROM lease_until - statement_timestamp()) * 1000000)::bigint ELSE 0 END`

// notifyReturning ends lease mode's complete and release statements: for
// the row changed, if any, it sends the notification that wakes the
// requests waiting for it, if one marked it as watched, and returns
// whether it did (settle reads only the command tag's count of rows); the
// same notification as transactional mode's completion (txComplete), whose
// CTE reads the rows returned only to count them.
const notifyReturning = `
RETURNING (CASE WHEN watched THEN pg_notify($CHANNEL, $PAYLOAD)::text END) IS NOT NULL`

// buildStatements returns the statements on table. Every parameter is cast
// to its column's type in the SQL, so that a statement means the same in
// every pgx QueryExecMode: the exec and simple-protocol modes, which
// PgBouncer users set, never ask the server for the parameters' types and
// send each value as its Go type suggests (a []byte as bytea, a string as
// text), while the other modes take the server's inference.
func buildStatements(table string) statements {
	st := buildLeaseStatements(table)
	// txClaim is claim, noting in the transaction that it acquired the key
	// (for txAcquired), in the column that says so.
	st.txClaim = strings.Replace(st.claim, "\nSELECT true, token,", "\nSELECT pg_catalog.set_config('pgstore.acquired', 'on', true) = 'on', token,", 1)
	if st.txClaim == st.claim {
		panic("pgstore: the claim statement no longer has the acquired column that txClaim marks")
	}
	newRow := strings.NewReplacer("$TABLE", table, "$REMAINING", leaseRemainingUS,
		"$SLACK5", strings.ReplaceAll(expirySlackSQL, "$TTL", "$5"))
	st.txClaimNew = newRow.Replace(txClaimNewSQL)
	st.txInsert = newRow.Replace(txInsertSQL)
	return st
}

// txInsertSQL is the claim statement of the first attempt of a
// transactional claim while nearly every claim acquires (see
// TxStore.firsts): the INSERT of the key, followed in its batch by BEGIN
// alone, so that a first execution's claim costs about what the INSERT of
// a hand-written table does. When the key has a row it inserts nothing and
// returns no row (ON CONFLICT DO NOTHING: no error, nothing of the key in
// the server log), BEGIN has run, and the claim's next batch begins with
// ROLLBACK, then runs txClaim, which decides. It returns the three
// columns that an acquired claim needs (see Tx.scanInserted), not
// txClaim's eleven: the server sets up the output of each column of each
// row it returns. The first, true, also puts back the lock_timeout that
// $BOUND (see txClaimNewSQL) set, once the insert no longer waits.
const txInsertSQL = insertNewSQL + `
RETURNING pg_catalog.set_config('lock_timeout', current_setting('pgstore.lock_timeout'), true) IS NOT NULL, token, ` + leaseLeftUS

// insertNewSQL inserts the row of a key that has none, in progress, from
// the one row of the subquery $BOUND (see txClaimNewSQL): the insert of
// txInsertSQL and txClaimNewSQL.
const insertNewSQL = `INSERT INTO $TABLE (scope, key, state, fingerprint, lease_until, expires_at)
SELECT $1::text, $2::text, 1::smallint, $3::text,
	statement_timestamp() + $4::bigint * interval '1 microsecond',
	statement_timestamp() + $5::bigint * interval '1 microsecond' + $SLACK5
FROM ($BOUND) AS bound
ON CONFLICT (scope, key) DO NOTHING`

// leaseLeftUS is how much of an inserted row's lease is left, on the
// database clock now, in microseconds.
const leaseLeftUS = `(extract(epoch FROM lease_until - clock_timestamp()) * 1000000)::bigint`

// txClaimNewSQL is the claim statement of the first attempt of a
// transactional claim (see Tx.claimAndBegin): the claim of a key that has
// no row, which is what a first execution finds. Its insert has no
// conflict target to update (ON CONFLICT DO NOTHING), so it costs about
// what a plain INSERT does. When the key has a row, the insert does
// nothing and the statement returns the row as txClaim would (a completed
// entry, a live lease, another fingerprint), read from the statement's
// snapshot. It returns no row when the row is one that txClaim would take
// over (expired, or a lapsed lease with the same fingerprint: rare in
// transactional mode, whose claims are not committed before their
// outcome) or was committed after the snapshot; the next attempt then
// runs txClaim, which decides those cases. An insert that meets an
// uncommitted row of the same key waits for its transaction to end, as
// txClaim's does, for as long as the lock timeout that the subquery
// $BOUND sets (NewTx fills it in) allows.
const txClaimNewSQL = `WITH ins AS (
` + insertNewSQL + `
RETURNING token, lease_until
)
SELECT pg_catalog.set_config('pgstore.acquired', 'on', true) = 'on', token, false, 0::smallint, ''::text, ` + leaseLeftUS + `, NULL::integer, NULL::jsonb, NULL::bytea, NULL::bytea, false FROM ins
UNION ALL
SELECT false, token, false, state, fingerprint, $REMAINING, status, header, header_bin, body, oversize FROM $TABLE
WHERE NOT EXISTS (SELECT 1 FROM ins) AND scope = $1::text AND key = $2::text AND expires_at > statement_timestamp()
	AND (state = 2 OR fingerprint <> $3::text OR lease_until > statement_timestamp())`

// inTheWaySQL holds for a row of the key $1, $2 that stands in the way of
// a claim with fingerprint $3, as the statement's snapshot shows it: not
// expired, and completed, of another fingerprint, or under a live lease.
const inTheWaySQL = `scope = $1::text AND key = $2::text AND expires_at > statement_timestamp()
		AND (state = 2 OR fingerprint <> $3::text OR lease_until > statement_timestamp())`

// upsertSQL inserts the row of a key in progress, or takes over the row in
// the way when it is expired or in progress with a lapsed lease and the
// same fingerprint, and returns $RETURNING; it returns no row when another
// row stands in the way (a completed entry, a live lease, another
// fingerprint). $ONLY is the condition, if any, under which it inserts at
// all. It is the insert of the claim statement, and the upsert statement
// on its own.
const upsertSQL = `INSERT INTO $TABLE AS e (scope, key, state, fingerprint, lease_until, expires_at)
	SELECT $1::text, $2::text, 1, $3::text,
		statement_timestamp() + $4::bigint * interval '1 microsecond',
		statement_timestamp() + $5::bigint * interval '1 microsecond' + $SLACK5$ONLY
	ON CONFLICT (scope, key) DO UPDATE SET
		state = 1,
		fingerprint = EXCLUDED.fingerprint,
		token = EXCLUDED.token,
		took_over = (e.state = 1 AND e.expires_at > statement_timestamp()),
		watched = (e.state = 1 AND e.expires_at > statement_timestamp() AND e.watched),
		lease_until = EXCLUDED.lease_until,
		expires_at = EXCLUDED.expires_at,
		status = NULL, header = NULL, header_bin = NULL, body = NULL, oversize = false
	WHERE e.expires_at <= statement_timestamp()
		OR (e.state = 1 AND e.lease_until <= statement_timestamp() AND e.fingerprint = EXCLUDED.fingerprint)
	RETURNING $RETURNING`

func buildLeaseStatements(table string) statements {
	r := strings.NewReplacer("$TABLE", table, "$REMAINING", leaseRemainingUS, "$LEFT", strings.Replace(leaseLeftUS, "lease_until", "e.lease_until", 1),
		"$SLACK5", strings.ReplaceAll(expirySlackSQL, "$TTL", "$5"), "$SLACK8", strings.ReplaceAll(expirySlackSQL, "$TTL", "$8"))
	notify := func(sql, channel, payload string) string {
		return strings.NewReplacer("$CHANNEL", channel, "$PAYLOAD", payload).Replace(sql)
	}
	// completeUpdate completes the claim of token. In lease mode the
	// claim must not have expired: another instance may have claimed the
	// key anew since. Transactional mode's (txCompleteUpdate) holds its
	// claim's row lock from the claim to the commit, so nobody else can
	// have claimed it whatever its expiry says, and a handler slower than
	// the ttl is completed, kept for the ttl from then on: refused, its
	// every run, as slow, would be rolled back.
	txCompleteUpdate := r.Replace(`UPDATE $TABLE SET
		state = 2, lease_until = NULL, status = $4::integer, header = NULL, header_bin = $5::bytea, body = $6::bytea, oversize = $7::boolean,
		expires_at = CASE
			WHEN expires_at - (statement_timestamp() + $8::bigint * interval '1 microsecond') BETWEEN interval '0' AND $SLACK8 THEN expires_at
			ELSE statement_timestamp() + $8::bigint * interval '1 microsecond' END
	WHERE scope = $1::text AND key = $2::text AND token = $3::bigint AND state = 1`)
	completeUpdate := txCompleteUpdate + ` AND expires_at > statement_timestamp()`
	return statements{
		// One round trip. cur reads the entry from the statement's snapshot;
		// when a completed entry, a live lease or another fingerprint stands
		// in the way the insert is skipped (no write, no lock) and the entry
		// is returned. Otherwise the upsert decides on the newest row version:
		// its WHERE re-checks that the row is expired, or in progress with a
		// lapsed lease and the same fingerprint. When a concurrent writer got
		// there first the statement returns no row and Claim runs it again.
		// An acquired claim answers how much of its lease is left on the
		// database clock now (clock_timestamp), after any wait for a lock.
		claim: r.Replace(`WITH cur AS (
	SELECT state, fingerprint, token, $REMAINING AS remaining_us, status, header, header_bin, body, oversize
	FROM $TABLE
	WHERE ` + inTheWaySQL + `
), ins AS (
	` + strings.NewReplacer("$ONLY", "\n\tWHERE NOT EXISTS (SELECT 1 FROM cur)", "$RETURNING", "e.token, e.took_over, $LEFT AS left_us").Replace(upsertSQL) + `
)
SELECT true, token, took_over, 0::smallint, ''::text, left_us, NULL::integer, NULL::jsonb, NULL::bytea, NULL::bytea, false FROM ins
UNION ALL
SELECT false, token, false, state, fingerprint, remaining_us, status, header, header_bin, body, oversize FROM cur
WHERE NOT EXISTS (SELECT 1 FROM ins)`),
		// upsert is Claim's first statement while nearly every claim
		// acquires (see Store.upserts): claim's insert alone, answering
		// with the columns of claim's answer that an acquired claim has
		// (see scanUpsert), and with no row when a row stands in the way
		// (claim then runs and answers with it). Like claim, it skips a
		// row that its snapshot shows in the way, with no lock and no
		// write (an index probe): ON CONFLICT DO UPDATE would lock the
		// row even where its WHERE then fails, and wait for whoever
		// holds it.
		upsert: r.Replace(strings.NewReplacer("$ONLY", "\n\tWHERE NOT EXISTS (SELECT 1 FROM $TABLE WHERE "+inTheWaySQL+")", "$RETURNING",
			"true, e.token, e.took_over, $LEFT").Replace(upsertSQL)),
		get: r.Replace(`SELECT state, fingerprint, token, $REMAINING, status, header, header_bin, body, oversize
FROM $TABLE WHERE scope = $1::text AND key = $2::text AND expires_at > statement_timestamp()`),
		// completed is Claim's fast path (see replayEnter): the entry of
		// $1, $2 if it is completed and not expired, read without the claim.
		completed: r.Replace(`SELECT fingerprint, token, status, header, header_bin, body, oversize
FROM $TABLE WHERE scope = $1::text AND key = $2::text AND state = 2 AND expires_at > statement_timestamp()`),
		// Renew keeps the row alive at least as long as its lease, so that a
		// held claim never expires under its holder.
		renew: r.Replace(`UPDATE $TABLE SET
	lease_until = statement_timestamp() + $4::bigint * interval '1 microsecond',
	expires_at = greatest(expires_at, statement_timestamp() + $4::bigint * interval '1 microsecond')
WHERE scope = $1::text AND key = $2::text AND token = $3::bigint AND state = 1 AND expires_at > statement_timestamp()`),
		complete: completeUpdate + notify(notifyReturning, "$9::text", "$10::text"),
		// txAcquired ends the claim batch of transactional mode (see tx.go):
		// it puts back the lock_timeout that the prelude saved, and fails,
		// so that BEGIN does not run, unless txClaim acquired the key.
		txAcquired: restoreLockTimeoutSQL + `,
	CAST(CASE WHEN current_setting('pgstore.acquired', true) IS DISTINCT FROM 'on' THEN '` + notAcquiredText + `' END AS integer)`,
		// txComplete is complete, failing when it changed no row so that
		// the COMMIT queued after it does not run.
		// It changes the claim's row only where this transaction wrote it
		// (its xmin, the transaction's or one of its subtransactions' id:
		// see writtenHereSQL); a row of the claim's token that another
		// transaction wrote fails it with switchedText instead of
		// staleText. It notifies as complete does (notifyReturning), so
		// that the CTE's rows are only counted: one aggregate, not two.
		txComplete: "WITH u AS (\n\t" + txCompleteUpdate + " AND " + writtenHereSQL + notify(notifyReturning, "$9::text", "$10::text") + `
) SELECT CAST(CASE WHEN count(*) = 0 THEN CASE WHEN EXISTS (` + r.Replace(`SELECT 1 FROM $TABLE WHERE scope = $1::text AND key = $2::text AND token = $3::bigint AND NOT `) + writtenHereSQL + `)
		THEN '` + switchedText + `' ELSE '` + staleText + `' END END AS integer) FROM u`,
		// txWait inserts a row of the key unless one stands in the way,
		// waiting for a transaction that inserted one and has not ended;
		// its caller rolls the row back.
		txWait: r.Replace(`INSERT INTO $TABLE (scope, key, state, fingerprint, lease_until, expires_at)
VALUES ($1::text, $2::text, 1::smallint, '', statement_timestamp(), statement_timestamp())
ON CONFLICT (scope, key) DO NOTHING`),
		// txWaitRow reads the key's row, waiting for a transaction that
		// changed it and has not ended.
		txWaitRow: r.Replace(`SELECT state, token FROM $TABLE WHERE scope = $1::text AND key = $2::text FOR UPDATE`),
		// txLeft answers whether the claim of token stands committed in
		// progress, after the ROLLBACK of its transaction.
		txLeft: r.Replace(`SELECT EXISTS (SELECT 1 FROM $TABLE WHERE scope = $1::text AND key = $2::text AND token = $3::bigint AND state = 1)`),
		// txHeld answers whether the claim of token is a row that the
		// transaction running it wrote (see Tx.blockSwitched).
		txHeld: r.Replace(`SELECT EXISTS (SELECT 1 FROM $TABLE WHERE scope = $1::text AND key = $2::text AND token = $3::bigint AND `) + writtenHereSQL + `)`,
		release: r.Replace(`DELETE FROM $TABLE
WHERE scope = $1::text AND key = $2::text AND token = $3::bigint AND state = 1 AND expires_at > statement_timestamp()`) + notify(notifyReturning, "$4::text", "$5::text"),
		// watch marks an entry in progress as awaited, so that its
		// completion or release notifies; marking it once is enough. It
		// answers whether the entry is in progress and marked, by this
		// statement or an earlier one.
		watch: r.Replace(`WITH u AS (
	UPDATE $TABLE SET watched = true
	WHERE scope = $1::text AND key = $2::text AND state = 1 AND NOT watched AND expires_at > statement_timestamp()
	RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM u) OR EXISTS (SELECT 1 FROM $TABLE
	WHERE scope = $1::text AND key = $2::text AND state = 1 AND watched AND expires_at > statement_timestamp())`),
		// The inner query walks the expires_at index and stops after $1 rows;
		// rows being claimed right now are skipped rather than waited for.
		deleteExpired: r.Replace(`DELETE FROM $TABLE AS t USING (
	SELECT scope, key FROM $TABLE
	WHERE expires_at <= statement_timestamp()
	ORDER BY expires_at
	LIMIT $1::bigint
	FOR UPDATE SKIP LOCKED
) AS d
WHERE t.scope = d.scope AND t.key = d.key AND t.expires_at <= statement_timestamp()`),
	}
}

// Claim implements idempotency.Store.Claim in one statement, or two when
// it began with the upsert and another row stands in the way (see the
// package documentation). The lease is rounded down and the ttl up to
// microseconds; a lease under a microsecond (which would round to a claim
// lapsed at birth) or a ttl that is not positive is an error. The row
// is kept a second longer than ttl (see the package documentation,
// "Schema and cleanup"). When ctx ends while a statement that may acquire
// the key is in flight, Claim returns ctx's error and leaves the statement
// to its answer (waited for at most the lease), releasing a claim it
// acquired: a claim whose answer was lost would hold the key for the whole
// lease.
func (s *Store) Claim(ctx context.Context, k idempotency.Key, fingerprint string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	if lease < time.Microsecond {
		return idempotency.ClaimResult{}, fmt.Errorf("pgstore: claim: %w, got %v", errNonPositiveLease, lease)
	}
	// Checked before either path, so that the replay fast path refuses
	// what the claim refuses.
	ttlUS, err := ttlMicros(ttl)
	if err != nil {
		return idempotency.ClaimResult{}, fmt.Errorf("pgstore: claim: %w", err)
	}
	if err := s.gate.Enter(ctx); err != nil {
		return idempotency.ClaimResult{}, fmt.Errorf("pgstore: claim: %w", err)
	}
	handedOff := false // to acquire's statements, which leave the gate (see acquire)
	defer func() {
		if !handedOff {
			s.gate.Leave()
		}
	}()
	if err := s.checkPool(ctx); err != nil {
		return idempotency.ClaimResult{}, fmt.Errorf("pgstore: claim: %w", err)
	}
	if s.replay.ReadFirst() {
		if e, ok, err := s.completedEntry(ctx, s.pool, k); err != nil || ok {
			if err != nil {
				return idempotency.ClaimResult{}, fmt.Errorf("pgstore: claim: %w", err)
			}
			s.replay.Observe(true)
			s.upserts.Observe(false)
			return idempotency.ClaimResult{Entry: e}, nil
		}
	}
	res, handedOff, err := s.acquire(ctx, k, fingerprint, lease, ttl, ttlUS)
	if err != nil {
		return idempotency.ClaimResult{}, fmt.Errorf("pgstore: claim: %w", err)
	}
	return res, nil
}

// claim runs sql, the claim statement, until it answers, at most
// claimAttempts times. alone says that each run is a statement of its own
// (lease mode, on the pool): one that fails with a serialization failure
// runs again too. A session whose default isolation is repeatable read or
// serializable gets one when a concurrent claim committed the row after
// the statement's snapshot, where read committed would have read that row
// (an answer of 409, not an error). Inside a transaction (transactional
// mode, which runs read committed), such a failure is the transaction's.
// Each answer is kept in got, when not nil (see claimAnswer).
func claim(ctx context.Context, q queryRower, got *claimAnswer, sql string, k idempotency.Key, fingerprint string, lease, ttl time.Duration, alone bool) (idempotency.ClaimResult, error) {
	ttlUS, err := ttlMicros(ttl)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	for range claimAttempts {
		res, err := claimOnce(ctx, q, got, sql, k, fingerprint, lease, ttlUS)
		if errors.Is(err, errLostRace) || (alone && serializationFailure(err)) {
			continue // look again
		}
		return res, err
	}
	return idempotency.ClaimResult{}, errNoAnswer
}

// serializationFailure reports whether err is PostgreSQL's serialization
// failure (SQLSTATE 40001).
func serializationFailure(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40001"
}

// claimOnce runs sql, the claim statement, once; it returns errLostRace
// when the statement returned no row. Its answer is kept in got, when not
// nil (see claimAnswer).
func claimOnce(ctx context.Context, q queryRower, got *claimAnswer, sql string, k idempotency.Key, fingerprint string, lease time.Duration, ttlUS int64) (idempotency.ClaimResult, error) {
	return scanClaim(claimRow(ctx, q, sql, k, fingerprint, lease, ttlUS), got)
}

// upsertOnce runs the upsert statement once; it returns errLostRace when
// the statement returned no row (a row stands in the way). Its answer is
// kept in got (see claimAnswer).
func upsertOnce(ctx context.Context, q queryRower, got *claimAnswer, sql string, k idempotency.Key, fingerprint string, lease time.Duration, ttlUS int64) (idempotency.ClaimResult, error) {
	return scanUpsert(claimRow(ctx, q, sql, k, fingerprint, lease, ttlUS), got)
}

// claimRow sends sql, the claim or the upsert statement, with the claim's
// arguments.
func claimRow(ctx context.Context, q queryRower, sql string, k idempotency.Key, fingerprint string, lease time.Duration, ttlUS int64) pgx.Row {
	return q.QueryRow(ctx, sql, pgtext.Encode(k.Scope), pgtext.Encode(k.Key), pgtext.Encode(fingerprint), lease.Microseconds(), ttlUS)
}

// errLostRace is scanClaim's answer to a claim statement that returned no
// row: a concurrent writer changed the row between the statement's
// snapshot and its insert, and the statement must run again.
var errLostRace = errors.New("pgstore: claim: lost a race with a concurrent writer")

// scanClaim reads the answer of the claim statement from row, scanning
// whether it acquired and the token into got, when not nil (see
// claimAnswer).
func scanClaim(row pgx.Row, got *claimAnswer) (idempotency.ClaimResult, error) {
	if got == nil {
		got = new(claimAnswer)
	}
	*got = claimAnswer{} // an earlier statement's answer is not this one's
	r := &got.row
	err := row.Scan(&got.acquired, &got.token, &got.tookOver, &r.state, &r.fingerprint, &r.remainingUS,
		&r.status, &r.header, &r.headerBin, &r.body, &r.oversize)
	if errors.Is(err, pgx.ErrNoRows) {
		return idempotency.ClaimResult{}, errLostRace
	}
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	if got.acquired {
		return got.result(), nil
	}
	r.token = got.token
	e, err := r.entry()
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	return idempotency.ClaimResult{Entry: e}, nil
}

// scanUpsert reads the answer of the upsert statement from row, as
// scanClaim does the claim statement's: the upsert answers only when it
// acquired, with the columns that an acquired claim's answer has (whether
// it acquired, always true, the token, whether it took over, the lease
// left), so that pgx decodes four columns, not eleven. Whether it
// acquired is a column of the answer, not implied by a row, so that pgx
// sets it in got with the token before it closes the row (see
// claimAnswer).
func scanUpsert(row pgx.Row, got *claimAnswer) (idempotency.ClaimResult, error) {
	*got = claimAnswer{} // an earlier statement's answer is not this one's
	err := row.Scan(&got.acquired, &got.token, &got.tookOver, &got.row.remainingUS)
	if err != nil || !got.acquired { // !acquired: never, but then the claim statement answers
		if err == nil || errors.Is(err, pgx.ErrNoRows) {
			err = errLostRace
		}
		return idempotency.ClaimResult{}, err
	}
	return got.result(), nil
}

// result is the ClaimResult of got, a claim that acquired.
func (got *claimAnswer) result() idempotency.ClaimResult {
	left := time.Duration(got.row.remainingUS) * time.Microsecond
	if left == 0 {
		left = -time.Microsecond // lapsed to the microsecond: not "unknown"
	}
	return idempotency.ClaimResult{Acquired: true, Token: got.token, TookOver: got.tookOver, LeaseRemaining: left}
}

// completedEntry reads the entry of k through q if it is completed and not
// expired (the completed statement), and reports whether there is one.
func (s *Store) completedEntry(ctx context.Context, q queryRower, k idempotency.Key) (idempotency.Entry, bool, error) {
	rd := &replayRead{scope: pgtype.Text{String: pgtext.Encode(k.Scope), Valid: true}, key: pgtype.Text{String: pgtext.Encode(k.Key), Valid: true}}
	rd.row.state = int16(idempotency.StateCompleted)
	rd.args = [...]any{&rd.scope, &rd.key}
	r := &rd.row
	rd.dest = [...]any{&r.fingerprint, &r.token, &r.status, &r.header, &r.headerBin, &r.body, &r.oversize}
	err := q.QueryRow(ctx, s.sql.completed, rd.args[:]...).Scan(rd.dest[:]...)
	if errors.Is(err, pgx.ErrNoRows) {
		return idempotency.Entry{}, false, nil
	}
	if err != nil {
		return idempotency.Entry{}, false, err
	}
	e, err := r.entryInto(&rd.resp, s.headers)
	return e, err == nil, err
}

// replayRead is what completedEntry reads a completed entry with, in one
// allocation: the statement's arguments, the scan's destinations, the row
// and the Response of the entry, which keeps the rest alive as long as a
// caller keeps it. Apart they took six allocations. The arguments are
// pgtype.Text pointers: an interface holds a pointer without boxing it,
// and pgx encodes a pgtype.Text as it is, where it copies what a *string
// points to through reflect (an allocation each).
type replayRead struct {
	scope, key pgtype.Text
	args       [2]any
	dest       [7]any
	row        entryRow
	resp       idempotency.Response
}

// entryRow is a row as scanned from the claim and get statements.
type entryRow struct {
	state       int16
	fingerprint string
	token       int64
	remainingUS int64
	status      *int32
	header      []byte // JSON, as written before header_bin existed
	headerBin   []byte // stampedHeader
	body        []byte
	oversize    bool
}

func (r entryRow) entry() (idempotency.Entry, error) { return r.entryInto(nil, nil) }

// entryInto is entry, with a completed entry's Response in resp, when not
// nil (a new one otherwise), and its header decoded through shared, when
// not nil (a header of its own otherwise).
func (r *entryRow) entryInto(resp *idempotency.Response, shared *headercodec.Shared) (idempotency.Entry, error) {
	e := idempotency.Entry{
		State:       idempotency.State(r.state),
		Fingerprint: pgtext.Decode(r.fingerprint),
		Token:       r.token,
	}
	switch e.State {
	case idempotency.StateInProgress:
		e.LeaseRemaining = time.Duration(r.remainingUS) * time.Microsecond
	case idempotency.StateCompleted:
		if resp == nil {
			resp = new(idempotency.Response)
		}
		*resp = idempotency.Response{Body: r.body, Oversize: r.oversize}
		if r.status != nil {
			resp.Status = int(*r.status)
		}
		switch {
		case stampedFor(r.headerBin, r.token):
			if len(r.headerBin) > stampLen {
				decode := headercodec.Decode
				if shared != nil {
					decode = shared.Decode
				}
				h, err := decode(r.headerBin[stampLen:])
				if err != nil {
					return idempotency.Entry{}, fmt.Errorf("decode stored header: %w", err)
				}
				resp.Header = h
			}
		case len(r.header) > 0: // written by an earlier version
			if err := json.Unmarshal(r.header, &resp.Header); err != nil {
				return idempotency.Entry{}, fmt.Errorf("decode stored header: %w", err)
			}
		}
		e.Response = resp
	default:
		return idempotency.Entry{}, fmt.Errorf("unknown state %d in row", r.state)
	}
	return e, nil
}

// Get implements idempotency.Store.Get. Expired rows are reported as absent
// even before the reaper deletes them.
func (s *Store) Get(ctx context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	if err := s.gate.Enter(ctx); err != nil {
		return idempotency.Entry{}, false, fmt.Errorf("pgstore: get: %w", err)
	}
	defer s.gate.Leave()
	if err := s.checkPool(ctx); err != nil {
		return idempotency.Entry{}, false, fmt.Errorf("pgstore: get: %w", err)
	}
	var row entryRow
	err := s.pool.QueryRow(ctx, s.sql.get, pgtext.Encode(k.Scope), pgtext.Encode(k.Key)).
		Scan(&row.state, &row.fingerprint, &row.token, &row.remainingUS,
			&row.status, &row.header, &row.headerBin, &row.body, &row.oversize)
	if errors.Is(err, pgx.ErrNoRows) {
		return idempotency.Entry{}, false, nil
	}
	if err != nil {
		return idempotency.Entry{}, false, fmt.Errorf("pgstore: get: %w", err)
	}
	e, err := row.entry()
	if err != nil {
		return idempotency.Entry{}, false, fmt.Errorf("pgstore: get: %w", err)
	}
	return e, true, nil
}

// Renew implements idempotency.Store.Renew. It also pushes the row's expiry
// to at least the end of the new lease. It runs on the Store's own renewal
// connections (see WithRenewalConns), so that it never waits behind
// requests, and it is one round trip on any of them, prepared or not
// (pgx.QueryExecModeExec). The lease is rounded down to microseconds; one
// under a microsecond is an error, as in Claim.
func (s *Store) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	if lease < time.Microsecond {
		return fmt.Errorf("pgstore: renew: %w, got %v", errNonPositiveLease, lease)
	}
	args := []any{pgx.QueryExecModeExec, pgtext.Encode(k.Scope), pgtext.Encode(k.Key), token, lease.Microseconds()}
	pool := s.renewalPool()
	tag, err := pool.Exec(ctx, s.sql.renew, args...)
	if err != nil && pool != s.pool {
		if s.renewalsClosed() {
			// Close closed the renewal pool under this renewal: it goes to
			// the main pool, as the renewals after Close do. Renew may run
			// twice (it only moves the lease on), though the first one
			// sent nothing unless it failed for another reason: Close
			// waits for the connections in use.
			tag, err = s.pool.Exec(ctx, s.sql.renew, args...)
		} else if connBroken(err) {
			pool.Reset() // see connBroken
		}
	}
	return checkTag("renew", tag.RowsAffected(), err)
}

// Complete implements idempotency.Store.Complete. The header is kept byte
// for byte (headercodec, in a bytea column) and the body as bytea. The ttl
// is rounded up to microseconds; a ttl that is not positive is an error. The
// row is kept for ttl from now, or up to a thousandth of ttl (at most a
// second) longer when that keeps the claim's expiry (see the package documentation, "Schema and cleanup"). A
// response too large for the database (its body, header, scope and key
// over about 1 GB together, or 512 MB in the exec modes that send them as
// text) is refused before it is sent, and one the
// database refuses for its size is, too: both are reported as
// idempotency.ErrResponseNotStorable, and nothing changes.
func (s *Store) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	return s.settle(ctx, "complete", s.sql.complete, k, token, &resp, ttl)
}

// Release implements idempotency.Store.Release: it deletes the row, so Get
// reports it absent, and the next Claim inserts it again with a new token from
// the sequence.
func (s *Store) Release(ctx context.Context, k idempotency.Key, token int64) error {
	return s.settle(ctx, "release", s.sql.release, k, token, nil, 0)
}

// queryRower is the part of the pool and of pgx.Tx that the statements need.
type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// settle runs the complete statement (resp not nil) or the release
// statement on the pool, in one round trip that also wakes requests
// waiting for the entry on any instance.
func (s *Store) settle(ctx context.Context, op, sql string, k idempotency.Key, token int64, resp *idempotency.Response, ttl time.Duration) error {
	scope, key := pgtext.Encode(k.Scope), pgtext.Encode(k.Key)
	channel, payload := s.watch.channel(), s.watch.payload(scope, key)
	var args []any
	if resp != nil {
		ttlUS, err := ttlMicros(ttl)
		if err != nil {
			return fmt.Errorf("pgstore: %s: %w", op, err)
		}
		header := stampedHeader(token, resp.Header)
		if err := s.checkOutcomeSize(resp.Body, header, scope, key); err != nil {
			return fmt.Errorf("pgstore: %s: %w", op, err)
		}
		args = []any{scope, key, token, int32(resp.Status), header, resp.Body, resp.Oversize, ttlUS, channel, payload}
	} else {
		args = []any{scope, key, token, channel, payload}
	}
	// The connection is released by a defer, as the pool's Exec does, not
	// by the Close of the pool's rows: a panic in pgx (a tracer's, in
	// TraceQueryStart or in TraceQueryEnd, which Close calls) would skip
	// that release, and the connection would stay acquired for good.
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return checkTag(op, 0, err)
	}
	defer conn.Release()
	// Query, not Exec: the statement answers a row (see notifyReturning),
	// which Exec would copy into a result of its own (five allocations);
	// settle needs only the command tag.
	rows, err := conn.Conn().Query(ctx, sql, args...)
	rows.Close()
	tag := rows.CommandTag()
	if err == nil {
		err = rows.Err()
	}
	if resp != nil && isTooLarge(err) {
		return fmt.Errorf("pgstore: %s: %w: %w", op, idempotency.ErrResponseNotStorable, err)
	}
	return checkTag(op, tag.RowsAffected(), err)
}

// maxOutcomeBytes bounds the bytes of a completion's body, header, scope
// and key together, the arguments whose size the caller chooses, all sent
// in one protocol message, as they are sent (see checkOutcomeSize).
// PostgreSQL reads no message over 1 GB less 2 bytes (0x3fffffff - 1,
// PQ_LARGE_MESSAGE_LIMIT; pgx refuses to send one, with an error that is
// no *pgconn.PgError), and a bytea value, its 4-byte header included, is
// at most 1 GB less 1 byte (8 more bytes while it is compressed). 64 KiB
// are left for the rest of the message: the other arguments (the
// notification channel and payload are short), their lengths, the
// statement's name or, in the simple protocol, its text. Tests lower it.
var maxOutcomeBytes = 0x3fffffff - 1 - 64<<10

// checkOutcomeSize returns an error wrapping
// idempotency.ErrResponseNotStorable when a completion with this body,
// stamped header, scope and key (as pgtext.Encode keeps them) would pass
// maxOutcomeBytes as the pool's exec mode sends them: byte for byte in
// the binary format of the modes that describe their statements, twice
// that when s.textArgs (QueryExecModeExec sends a bytea as "\x" and two
// hex digits a byte, QueryExecModeSimpleProtocol quotes that hex, and a
// text with each quote doubled, into the SQL), which bounds what those
// modes send. It is checked before anything is sent: over the bound, the
// statement would fail, and in transactional mode abort the transaction
// it is batched in, the handler's writes with it.
func (s *Store) checkOutcomeSize(body, header []byte, scope, key string) error {
	n := len(body) + len(header) + len(scope) + len(key)
	if s.textArgs {
		n *= 2
	}
	if n > maxOutcomeBytes {
		return fmt.Errorf("%w: %d bytes of body, header, scope and key as sent, over the %d PostgreSQL takes in one message",
			idempotency.ErrResponseNotStorable, n, maxOutcomeBytes)
	}
	return nil
}

// isTooLarge reports whether err is PostgreSQL refusing a value for its
// size (program_limit_exceeded, or a field over the protocol's limit).
func isTooLarge(err error) bool {
	pgErr := pgError(err)
	return pgErr != nil && (pgErr.Code == "54000" || pgErr.Code == "22001")
}

// pgError returns the *pgconn.PgError in err's chain, or nil; it costs
// nothing when err is nil, as it is on every path that succeeds.
func pgError(err error) *pgconn.PgError {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr
	}
	return nil
}

// errNonPositiveTTL is returned by Claim and Complete for a ttl that is not
// positive: the row would be expired at birth, so a second Claim would
// acquire the key too, and a completed outcome would be forgotten at once.
var errNonPositiveTTL = errors.New("ttl must be positive")

// errNonPositiveLease is returned by Claim and Renew for a lease that is not
// positive in whole microseconds, the unit the lease is sent in (under one
// microsecond it rounds to zero): the claim would lapse at birth and any
// duplicate could take it over while the handler runs.
var errNonPositiveLease = errors.New("lease must be at least a microsecond")

// ttlMicros returns ttl in whole microseconds, rounded up so that a ttl
// below a microsecond still keeps the row for one.
func ttlMicros(ttl time.Duration) (int64, error) {
	if ttl <= 0 {
		return 0, fmt.Errorf("%w, got %v", errNonPositiveTTL, ttl)
	}
	return clock.CeilUnits(ttl, time.Microsecond), nil
}

func checkTag(op string, rows int64, err error) error {
	if err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	if rows == 0 {
		return fmt.Errorf("pgstore: %s: %w", op, idempotency.ErrStaleToken)
	}
	return nil
}

// stampLen is the length of the token stamp that begins header_bin.
const stampLen = 8

// stampedHeader is the header_bin of a completion by the claim token: the
// token (8 bytes, big-endian), then h in headercodec form. An earlier
// version, which knows only the JSON header column, leaves header_bin as
// it was when it re-claims and completes an expired key; the stamp, from
// an older claim, then tells the reader that header_bin is not this
// record's.
func stampedHeader(token int64, h http.Header) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, stampLen+64), uint64(token))
	if len(h) > 0 {
		b = headercodec.Append(b, h)
	}
	return b
}

// stampedFor reports whether header_bin b was written by the completion of
// the claim with token.
func stampedFor(b []byte, token int64) bool {
	return len(b) >= stampLen && int64(binary.BigEndian.Uint64(b)) == token
}

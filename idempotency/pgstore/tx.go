package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/pgtext"
	"github.com/saferetry/saferetry/internal/replaymix"
)

var (
	_ idempotency.TxStore = (*TxStore)(nil)
	_ idempotency.Tx      = (*Tx)(nil)
)

// sqlstateLockNotAvailable is PostgreSQL's lock_not_available, raised when
// lock_timeout elapses.
const sqlstateLockNotAvailable = "55P03"

// sqlstateInvalidText is PostgreSQL's invalid_text_representation: what the
// casts of notAcquiredText, staleText and notReadCommittedText to integer
// raise, on purpose, in the statements of transactional mode that end a
// batch early. A batch's statements all run unless one fails, so failing
// is how such a statement keeps the ones queued after it from running; its
// position in the batch tells it apart from any other failure.
const sqlstateInvalidText = "22P02"

// The texts that the statements of transactional mode cast to integer to
// fail (see sqlstateInvalidText); PostgreSQL logs them with the error.
const (
	notAcquiredText      = "pgstore: not acquired, so no transaction is kept open (not an error)"
	staleText            = "pgstore: no claim of this transaction to complete"
	notReadCommittedText = "pgstore: the session does not default to read committed"
)

// TxStore is an idempotency.TxStore: given to idempotency.Middleware it makes
// the middleware run each protected request in one PostgreSQL transaction
// (see the package documentation for when to choose this mode). It embeds a
// lease-mode *Store over the same table, which provides CreateSchema,
// DeleteExpired, StartReaper and the plain Store methods. Create it with NewTx;
// the zero value is not usable. It is safe for concurrent use by multiple
// goroutines and processes; each Tx is used by one goroutine at a time.
type TxStore struct {
	*Store
	// boundSQL bounds the wait of a transactional claim inside a
	// transaction block: it saves lock_timeout (as pgstore.lock_timeout,
	// for restoreLockTimeoutSQL to put back) and sets the lock timeout.
	boundSQL string
	// preludeSQL starts the claim batch before the transaction block: it
	// is boundSQL, failing unless the transaction will be read committed.
	preludeSQL string
	// cacheStatements is whether the pool's connections run in pgx's
	// default QueryExecModeCacheStatement (see Tx.prepare), read once:
	// pgx.Conn.Config copies the whole configuration.
	cacheStatements bool
	// claimNewSQL is txClaimNewSQL for the first attempt of the claim
	// batch (unless insertSQL is), which has no prelude: the row it
	// inserts is selected from a subquery that does what preludeSQL does.
	claimNewSQL string
	// insertSQL is txInsertSQL, bounded likewise, for the first attempt
	// while firsts says that nearly every claim acquires.
	insertSQL string
	// claimStatements and commitStatements are the statements that the
	// Tx prepares on its connection (see Tx.prepare) for the claim batch
	// and for the commit's. Each attempt of the claim batch prepares those
	// it sends (insertStatements, claimNewStatements or retryStatements),
	// so that the usual one looks up two, not all six.
	claimStatements, commitStatements                     []string
	insertStatements, claimNewStatements, retryStatements []string
	// statementNames maps the name under which pgx prepares each of
	// claimStatements and commitStatements (see pgxStatementName) to its
	// text, so that forgetOne finds the one a DEALLOCATE named without
	// preparing any: a connection has prepared only those it sent.
	statementNames map[string]string
	// firsts counts the claims that acquired the key among those Claim
	// answered: while at least firstsEnter of a window's did, the claim
	// batch is insertSQL and BEGIN, until fewer than firstsLeave do. A
	// claim that does not acquire then costs a round trip more: ROLLBACK,
	// with the claim batch. It is the TxStore's own, apart from its
	// Store's (Store.upserts), which counts the lease-mode claims.
	firsts *replaymix.Mix
	// channelArg is the store's notification channel (watcher.channel),
	// as the txComplete statement's argument: boxed once, not at every
	// Complete.
	channelArg any
}

// restoreLockTimeoutSQL puts back the lock_timeout that boundSQL or
// preludeSQL saved, for the rest of the transaction: the session's value,
// or the one the transaction had, whether it came from the server's
// configuration, a start-up parameter or a SET.
const restoreLockTimeoutSQL = `SELECT pg_catalog.set_config('lock_timeout', current_setting('pgstore.lock_timeout'), true)`

// boundLockTimeoutSQL returns the statement that saves lock_timeout and
// sets it to lockTimeoutSQL(ms) for the transaction, with the extra
// columns (SQL that follows the first column in the SELECT list).
func boundLockTimeoutSQL(ms int64, extra string) string {
	return fmt.Sprintf(`SELECT pg_catalog.set_config('lock_timeout', %s, true)%s
FROM (SELECT pg_catalog.set_config('pgstore.lock_timeout', current_setting('lock_timeout'), true)) AS saved`, lockTimeoutSQL(ms), extra)
}

// lockTimeoutSQL returns the text of the lock timeout a claim waits with,
// in milliseconds: ms, or nine tenths of the session's statement_timeout
// when that is shorter. PostgreSQL times each statement of a batch on its
// own, so a statement_timeout under ms (an operator's, set for a role or
// the database, often 1 s against DefaultLockTimeout's 2 s) would cut the
// wait as a failed statement (SQLSTATE 57014), which the Middleware
// answers 503 ProblemStoreUnavailable; ended by the lock timeout first, it
// is a key in progress (409), as WithLockTimeout promises. The session's
// statement_timeout itself is left as it is. Without one (the usual
// case), the cost is reading the setting: the interval is parsed only
// when there is one.
func lockTimeoutSQL(ms int64) string {
	return fmt.Sprintf(`CASE current_setting('statement_timeout') WHEN '0' THEN '%d'
		ELSE greatest(1, least(%d, (extract(epoch FROM current_setting('statement_timeout')::interval) * 900)::bigint))::text END`, ms, ms)
}

// NewTx returns a TxStore over pool. The options are those of New;
// WithLockTimeout bounds how long a claim waits for a concurrent
// transaction's uncommitted claim on the same key. NewTx panics when the
// WithTable name is invalid. What the handler may do with the
// transaction it gets, and what its commit waits for (its goroutines'
// statements, rows and batch results) or refuses (a COMMIT the handler
// sent itself), is in TxFromContext. Transactional mode needs PostgreSQL
// 13 or later (its completion reads pg_current_xact_id).
func NewTx(pool *pgxpool.Pool, opts ...Option) *TxStore {
	s := New(pool, opts...)
	s.watch.tx = true
	ms := clock.CeilUnits(s.cfg.lockTimeout, time.Millisecond)
	bound := boundReadCommittedSQL(ms)
	ts := &TxStore{
		Store:    s,
		boundSQL: boundLockTimeoutSQL(ms, ""),
		preludeSQL: boundLockTimeoutSQL(ms, `,
	`+readCommittedCheckSQL),
		claimNewSQL:     strings.Replace(s.sql.txClaimNew, "$BOUND", bound, 1),
		insertSQL:       strings.Replace(s.sql.txInsert, "$BOUND", bound, 1),
		firsts:          replaymix.New(replaymix.Adaptive, firstsEnter, firstsLeave),
		cacheStatements: pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement,
		channelArg:      s.watch.channel(),
	}
	ts.claimStatements = []string{ts.claimNewSQL, ts.insertSQL, ts.preludeSQL, s.sql.txClaim, s.sql.txAcquired, "BEGIN"}
	ts.insertStatements = []string{ts.insertSQL, "BEGIN"}
	ts.claimNewStatements = []string{ts.claimNewSQL, s.sql.txAcquired, "BEGIN"}
	ts.retryStatements = []string{ts.preludeSQL, s.sql.txClaim, s.sql.txAcquired, "BEGIN"}
	ts.commitStatements = []string{s.sql.txComplete, "COMMIT"}
	ts.statementNames = make(map[string]string, len(ts.claimStatements)+len(ts.commitStatements))
	for _, sqls := range [][]string{ts.claimStatements, ts.commitStatements} {
		for _, sql := range sqls {
			ts.statementNames[pgxStatementName(sql)] = sql
		}
	}
	return ts
}

// readCommittedCheckSQL is NULL in a transaction that is read committed,
// and fails (see sqlstateInvalidText) in any other.
const readCommittedCheckSQL = `CAST(CASE WHEN current_setting('transaction_isolation') <> 'read committed' THEN '` + notReadCommittedText + `' END AS integer)`

// boundReadCommittedSQL returns the query that saves lock_timeout and sets
// it to lockTimeoutSQL(ms) for the transaction, failing unless the
// transaction is read committed: preludeSQL as a subquery, whose one row
// claimNewSQL inserts from, so that it runs before the insert. The check
// is in set_config's argument because PostgreSQL leaves a subquery with a
// volatile function in its select list as it is, evaluated, where it could
// drop an unused column of stable functions only.
func boundReadCommittedSQL(ms int64) string {
	return fmt.Sprintf(`SELECT pg_catalog.set_config('lock_timeout', coalesce(%s::text, %s), true)
	FROM (SELECT pg_catalog.set_config('pgstore.lock_timeout', current_setting('lock_timeout'), true)) AS saved`, readCommittedCheckSQL, lockTimeoutSQL(ms))
}

// BeginTx implements idempotency.TxStore. It takes a connection from the
// pool and sends nothing yet: the transaction begins with the claim, in the
// claim's round trip. The connection returns to the pool when the
// transaction commits or rolls back, or when the claim is not acquired.
func (s *TxStore) BeginTx(ctx context.Context) (idempotency.Tx, error) {
	if err := s.checkPool(ctx); err != nil {
		return nil, fmt.Errorf("pgstore: begin: %w", err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: begin: %w", err)
	}
	return &Tx{store: s, conn: conn, pgxConn: conn.Conn()}, nil
}

// Tx is one transaction of a TxStore, created by BeginTx; the zero value is
// not usable. It is used by one goroutine at a time. A first execution
// costs two round trips (the claim batch, which begins the transaction, and
// the completion batch, which commits it) and one commit to disk; a claim
// that is not acquired (a replay, a request in progress, another payload)
// costs one round trip and leaves no transaction to roll back (see the
// package documentation for the exec modes and sessions where it costs
// more, and for the plain INSERT that begins the claims while nearly every
// one acquires, after which a claim that is not acquired costs two).
//
// The claim batch runs the claim before BEGIN, in the implicit transaction
// that PostgreSQL opens for the statements of one batch: BEGIN then turns
// it into the transaction block that the handler continues, with the
// claim's row in it. When the claim is not acquired, a statement queued
// after it fails on purpose (a cast of notAcquiredText), so that BEGIN
// never runs and PostgreSQL rolls the implicit transaction back when the
// batch ends; the server log shows that error. (The plain INSERT's batch
// fails nothing: when it inserted nothing, the next batch begins with
// ROLLBACK.) With
// pgx.QueryExecModeSimpleProtocol pgx sends a batch as one query string of
// several statements, which PostgreSQL runs the same way (an implicit
// transaction block, left at the first error). Complete keeps the outcome
// and Commit sends it with COMMIT.
type Tx struct {
	store *TxStore
	conn  *pgxpool.Conn // nil once released to the pool
	// connMu guards conn where it goes (takeConn): abandon takes it
	// while a statement of the handler holds lk, whose settleCutShort
	// may be releasing it.
	connMu sync.Mutex
	// pgxConn is conn's connection, which the handler's statements use:
	// read from conn once, so that abandon, taking conn out of the pool,
	// writes nothing that they read.
	pgxConn *pgx.Conn
	tx      pgx.Tx     // the transaction block, once a claim acquired the key (or h began it)
	h       *handlerTx // what the handler gets: tx, refused once the Tx ended
	// lk is held by each statement of the handler (handlerTx.lock), by
	// its rows and batch results until they are closed, and by Commit and
	// Rollback, so that what a goroutine of the handler still runs or
	// reads ends before the transaction does (Rollback waits for
	// statements only: see there); once Commit or Rollback asks for it,
	// it refuses the handler's statements (txLock.lockEnd).
	lk txLock
	// lockLost: Commit's wait for lk ended with its context; Rollback
	// then does not wait again (see abandon).
	lockLost bool

	claimed idempotency.Key
	token   int64
	ttl     time.Duration // the claim's
	// blockEnded: a statement of the handler ended the transaction block
	// (see checkBlock); endRecorded: recordEnded ran; notReplayable: the
	// claim, which that statement committed, was recorded as completed but
	// not replayable (by recordEnded or settleCutShort). All are guarded
	// by lk.
	blockEnded, endRecorded, notReplayable bool
	// lo is the savepoint that the handler's LargeObjects are built on
	// (see largeObjects), nil until it asks for them. Guarded by lk.
	lo pgx.Tx
	// sessionSet: a statement of the handler may have changed a setting
	// of the session beyond the transaction (see setsSession), so that
	// release closes the connection. Guarded by lk.
	sessionSet bool
	// suspect: the handler sent something that may have ended the block
	// and begun another unseen (a query string with a semicolon, a batch,
	// or it took the Conn), so that Rollback looks (rollbackChecked).
	// Atomic: Conn sets it also while rows hold lk.
	suspect  atomic.Bool
	outcome  []any // Complete's arguments to the txComplete statement
	finished bool
	// claimArgs and outcomeArgs hold the arguments of the claim batch's
	// claim (claimAndBegin) and of the txComplete statement (outcome),
	// and batch, queued and queuedPtrs the Tx's own batches (the claim
	// batch, the commit's): storage on the Tx, which is on the heap
	// already, so that a first execution does not allocate each anew.
	// pgx reads a batch only until its results are closed.
	claimArgs   [5]any
	outcomeArgs [10]any
	batch       pgx.Batch
	queued      [5]pgx.QueuedQuery
	queuedPtrs  [5]*pgx.QueuedQuery
	// inserted is what scanInserted scans the plain INSERT's row into.
	inserted struct {
		restored      bool
		token, leftUS int64
	}
}

type txKey struct{}

// Context implements idempotency.Tx: the returned context carries the
// transaction, which handlers get back with TxFromContext. Taken before a
// Claim acquired the key, the transaction block begins at its first
// statement (one round trip more).
func (t *Tx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, txKey{}, t.PgxTx())
}

// PgxTx returns the transaction that TxFromContext returns to the handler.
func (t *Tx) PgxTx() pgx.Tx {
	if t.h == nil {
		t.h = newHandlerTx(t)
	}
	return t.h
}

// TxFromContext returns the transaction that transactional mode hands to the
// handler, and whether ctx carries one. Handlers write through it so that
// their writes commit or roll back together with the idempotency record.
// Handlers may also be served by lease mode or a non-PostgreSQL store, in
// which case ok is false and they should use their own connection.
//
// Handlers must not commit or roll it back themselves: its Commit is
// refused with ErrHandlerCommit, and commits nothing. A statement sent
// through it that ends the transaction block (COMMIT, END, ROLLBACK,
// ABORT) fails with ErrHandlerEndedTx, which says what becomes of the
// request and its key, and so do every later statement and the request's
// commit. That is caught after each statement, and at the commit, from the
// transaction status that pgx keeps (no round trip). So is a statement
// that ends the block and begins another in one go ("COMMIT; BEGIN" in
// one query string, COMMIT AND CHAIN), which leaves the status in a
// block: after a statement whose tag (the last, for a query string of
// several) is COMMIT, ROLLBACK, BEGIN or START TRANSACTION, one round trip
// checks that the claim's row is still the open transaction's (its xmin),
// and the commit checks it with the stored answer, which catches every
// other form (a batch of the two, a query string ending with another
// statement, the Conn below); the block begun then is rolled back, with
// whatever ran in it. So does the rollback of a request (a status that is
// not stored, a panic) whose handler sent a batch or a query string with a
// semicolon, or took the Conn, in one round trip more. Statements run on the connection from its Conn
// method are caught late: a transaction begun on it (pgx.BeginFunc on it,
// code written for a *pgx.Conn), whose BEGIN PostgreSQL ignores inside
// the open block, ends the request's with its COMMIT, and what it runs
// after that commits on its own, before the next statement on the
// transaction or the commit catches it. Whatever a switch caught late
// committed (the claim, in progress, and the writes before it), a retry
// may take the key over meanwhile and run again. A statement that may
// have committed (one naming COMMIT or END) and that its context cut
// short, pgx closing the connection, may commit without the client: the
// Tx then waits, on another connection and bounded by the lock timeout,
// for that session's transaction to end, and treats a claim it committed
// as above; when the wait fails, that is not known, and a retry may run
// again if it did. Pass the handler's code the pgx.Tx, not its Conn, and
// never send transaction control through either.
//
// A DEALLOCATE (of one prepared statement, or ALL) drops the statements
// that the Tx prepares on its connection in pgx's default exec mode, pgx
// still counting them prepared: sent through the transaction it is
// followed by one round trip that makes pgx forget the statement it names
// (the handler's others stay), or, after a DEALLOCATE ALL or one whose
// name it does not read, forgets them all on both sides (they are
// prepared again on their next use); sent through Conn, the next
// claim on the connection does that, and a commit that finds them gone
// fails, nothing committed, and closes the connection.
//
// A setting of the session changed through the transaction (SET or SET
// SESSION without LOCAL, RESET, seen by its tag or first word) would
// outlive the request, committed with it, on the connection back in the
// pool: the connection is closed at the request's end instead, and the
// pool's next user gets a new session, at the cost of a new connection.
// Use SET LOCAL (or set_config with is_local true), which ends with the
// transaction. A set_config(..., false), a SET inside a function, and
// anything sent through Conn are not seen.
//
// The store's statements run under the settings in force when they run,
// the completion after the handler included: a SET LOCAL search_path
// that leaves the store's table out and is still in force when the
// handler returns fails the request's commit (a 503, everything rolled
// back, so that a retry runs the handler again). A handler that changes
// search_path should name the table with its schema (WithTable).
//
// As on pgx's connection, one statement runs at a time (a statement of
// another goroutine waits for it), and none while rows (Query) or a
// batch's results (SendBatch) are open: such a statement fails at once
// ("conn busy"), whichever goroutine runs it. A statement (Exec, QueryRow,
// CopyFrom) that a goroutine of the handler still runs when the request
// ends is waited for, and so are, by the commit, rows and batch results
// that it still reads, until they are closed (pgx closes rows read to
// their end): they commit or roll back with the request. From the moment
// the request's commit or rollback begins, every statement is refused with
// pgx.ErrTxClosed (or "conn busy" while rows or results are open), also
// one that was waiting for a statement of another goroutine. The commit's
// wait is bounded by the Middleware's store timeout
// (idempotency.DefaultStoreTimeout): a statement still running then, or
// rows or results not closed, fail the commit, nothing is committed, the
// client gets 503 and the connection is closed. A rollback (a status that
// is not stored, a panic) waits as long for a statement, but not for rows
// or results: it closes the connection under them at once.
func TxFromContext(ctx context.Context) (tx pgx.Tx, ok bool) {
	tx, ok = ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok
}

// Claim implements idempotency.Tx. The row is inserted uncommitted, so other
// transactions claiming the same key wait for this one to end. Each wait
// of this claim for a row lock is bounded by the lock timeout
// (WithLockTimeout), set for the claim statement only: PostgreSQL counts
// every lock wait on its own, so a claim that waited behind a transaction
// that rolled back, and then behind another waiting claim that took the
// key, can wait up to the lock timeout again for each such holder. When a
// wait elapses Claim reports an entry in progress
// whose Fingerprint is the one given (the blocking claim's is not readable
// yet) and whose LeaseRemaining is the lock timeout, and returns no error.
// The row's lease is already lapsed: it only matters if the transaction
// commits without Complete, in which case the next claim with the same
// fingerprint takes over. A claim that is not acquired leaves no
// transaction open; Rollback then only returns the connection.
func (t *Tx) Claim(ctx context.Context, k idempotency.Key, fingerprint string, ttl time.Duration) (idempotency.ClaimResult, error) {
	if t.conn == nil {
		return idempotency.ClaimResult{}, fmt.Errorf("pgstore: tx claim: %w", pgx.ErrTxClosed)
	}
	// Checked before either path, so that the replay fast path refuses
	// what the claim refuses.
	if _, err := ttlMicros(ttl); err != nil {
		return idempotency.ClaimResult{}, fmt.Errorf("pgstore: tx claim: %w", err)
	}
	var res idempotency.ClaimResult
	var err error
	if t.tx != nil {
		// A second claim, inside the transaction block.
		res, err = claim(ctx, txClaimer{t.tx, t.store.boundSQL}, nil, t.store.sql.claim, k, fingerprint, 0, ttl, false)
	} else {
		// A probe's claim is none of a request's, whose share of replays
		// and of first claims the fast paths follow (see
		// idempotency.ProbeContext).
		counted := !idempotency.IsProbe(ctx)
		if t.store.replay.ReadFirst() {
			// The replay fast path (see the package documentation): a
			// completed entry is committed and stays as it is until it
			// expires, so a plain read on the Tx's connection answers it
			// without the claim batch, and opens no transaction.
			e, ok, err := t.store.completedEntry(ctx, t.conn, k)
			if err != nil {
				return idempotency.ClaimResult{}, fmt.Errorf("pgstore: tx claim: %w", err)
			}
			if ok {
				if counted {
					t.store.replay.Observe(true)
					t.store.firsts.Observe(false)
				}
				return idempotency.ClaimResult{Entry: e}, nil
			}
		}
		res, err = t.claimAndBegin(ctx, k, fingerprint, ttl)
		if err == nil && counted {
			t.store.replay.Observe(!res.Acquired && res.Entry.State == idempotency.StateCompleted)
			t.store.firsts.Observe(res.Acquired)
		}
	}
	if isSQLState(err, sqlstateLockNotAvailable) {
		return idempotency.ClaimResult{Entry: idempotency.Entry{
			State:          idempotency.StateInProgress,
			Fingerprint:    fingerprint,
			LeaseRemaining: t.store.cfg.lockTimeout,
		}}, nil
	}
	if err != nil {
		return idempotency.ClaimResult{}, fmt.Errorf("pgstore: tx claim: %w", err)
	}
	if res.Acquired {
		t.claimed, t.token, t.ttl = k, res.Token, ttl
	}
	return res, nil
}

// claimAndBegin runs the claim batch (see Tx) until it answers, and keeps
// the transaction block it leaves open when the claim acquired the key.
func (t *Tx) claimAndBegin(ctx context.Context, k idempotency.Key, fingerprint string, ttl time.Duration) (idempotency.ClaimResult, error) {
	ttlUS, err := ttlMicros(ttl)
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	scope, key := pgtext.Encode(k.Scope), pgtext.Encode(k.Key)
	insert := t.store.firsts.ReadFirst()
	t.claimArgs = [5]any{scope, key, pgtext.Encode(fingerprint), int64(0), ttlUS}
	args := t.claimArgs[:]
	reprepared := false
	for attempt := range claimAttempts {
		// The first attempt claims with insertSQL or claimNewSQL, which
		// bound the wait themselves (no prelude); the others with the
		// prelude and txClaim, after a ROLLBACK of the transaction block
		// that insertSQL's BEGIN left open when it inserted nothing.
		b := t.newBatch()
		var preludeErr, claimErr error
		var res idempotency.ClaimResult
		before := 0 // the results before the claim's
		// The statements that the batch sends (but ROLLBACK), to prepare.
		prepared := t.store.retryStatements
		switch {
		case attempt == 0 && insert:
			prepared = t.store.insertStatements
			b.BeginTx(pgx.TxOptions{BeginQuery: t.store.insertSQL})
			b.QueuedQueries[0].Arguments = args
		case attempt == 0:
			prepared = t.store.claimNewStatements
			b.BeginTx(pgx.TxOptions{BeginQuery: t.store.claimNewSQL})
			b.QueuedQueries[0].Arguments = args
			t.queue(b, t.store.sql.txAcquired)
		default:
			if t.conn.Conn().PgConn().TxStatus() != 'I' {
				b.BeginTx(pgx.TxOptions{BeginQuery: "ROLLBACK"})
				t.queue(b, t.store.preludeSQL)
			} else {
				b.BeginTx(pgx.TxOptions{BeginQuery: t.store.preludeSQL})
			}
			t.queue(b, t.store.sql.txClaim, args...)
			t.queue(b, t.store.sql.txAcquired)
			before = b.Len() - 2 // ROLLBACK, if queued, and the prelude
		}
		t.queue(b, "BEGIN")
		if err := t.prepare(ctx, prepared...); err != nil {
			return idempotency.ClaimResult{}, err
		}
		br := t.conn.Conn().SendBatch(ctx, b)
		for range before {
			if _, err := br.Exec(); err != nil {
				preludeErr = err
				break
			}
		}
		claimErr = preludeErr
		if preludeErr == nil {
			if attempt == 0 && insert {
				res, claimErr = t.scanInserted(br.QueryRow())
			} else {
				res, claimErr = scanClaim(br.QueryRow(), nil)
			}
			if attempt == 0 && isInvalidTextOf(claimErr, notReadCommittedText) {
				preludeErr = claimErr // the first attempt's read committed check
			}
			// What follows the claim (txAcquired, BEGIN): Close reports
			// its error.
			for range b.Len() - 1 - before {
				if _, err := br.Exec(); err != nil {
					break
				}
			}
		}
		closeErr := br.Close()
		tx := br.Tx()
		switch {
		case !reprepared && isUnprepared(preludeErr, claimErr, closeErr) && t.conn.Conn().PgConn().TxStatus() == 'I':
			// A DEALLOCATE that pgx did not send (a handler's, through its
			// Conn, in an earlier request) dropped the statements: the
			// batch failed as a whole, and claims again once they are
			// prepared anew.
			reprepared = true
			if err := t.forgetPrepared(ctx, ""); err != nil {
				return idempotency.ClaimResult{}, err
			}
			continue // the next attempt prepares its statements anew
		case attempt == 0 && insert && errors.Is(claimErr, errLostRace) && closeErr == nil:
			continue // the key has a row: txClaim decides, after a ROLLBACK
		case isInvalidText(preludeErr), isReadOnly(preludeErr, claimErr):
			// A session that defaults to another isolation level, or to
			// read only (a handler's SET SESSION CHARACTERISTICS, committed
			// with its request, may have left it so): begin the
			// transaction block first, as READ COMMITTED and READ WRITE,
			// and claim in it.
			return t.beginThenClaim(ctx, k, fingerprint, ttl)
		case preludeErr != nil:
			return idempotency.ClaimResult{}, preludeErr
		case errors.Is(claimErr, errLostRace):
			continue // look again
		case claimErr != nil:
			return idempotency.ClaimResult{}, claimErr
		case !res.Acquired:
			if closeErr != nil && !isInvalidText(closeErr) {
				return idempotency.ClaimResult{}, closeErr
			}
			return res, t.leftIdle(ctx, tx)
		case closeErr != nil:
			return idempotency.ClaimResult{}, closeErr
		}
		t.tx = tx
		return res, nil
	}
	return idempotency.ClaimResult{}, errNoAnswer
}

// newBatch returns the Tx's batch (see Tx.batch), emptied, for the next
// batch that the Tx sends.
func (t *Tx) newBatch() *pgx.Batch {
	t.batch = pgx.Batch{QueuedQueries: t.queuedPtrs[:0]}
	return &t.batch
}

// queue queues sql with args on b, the Tx's batch, as b.Queue does, in
// the Tx's storage: a new QueuedQuery value, so that nothing pgx kept in
// the one sent before (its statement description) is carried over.
func (t *Tx) queue(b *pgx.Batch, sql string, args ...any) {
	i := len(b.QueuedQueries)
	t.queued[i] = pgx.QueuedQuery{SQL: sql, Arguments: args}
	b.QueuedQueries = append(b.QueuedQueries, &t.queued[i])
}

// scanInserted reads the answer of insertSQL (see txInsertSQL) from row,
// as scanClaim reads txClaim's: its one row when it inserted the key
// (acquired), errLostRace when it returned none. It scans into the Tx's
// inserted, which is on the heap already: Scan's arguments escape.
func (t *Tx) scanInserted(row pgx.Row) (idempotency.ClaimResult, error) {
	a := &t.inserted
	err := row.Scan(&a.restored, &a.token, &a.leftUS)
	if errors.Is(err, pgx.ErrNoRows) {
		return idempotency.ClaimResult{}, errLostRace
	}
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	return idempotency.ClaimResult{Acquired: true, Token: a.token, LeaseRemaining: leaseLeft(a.leftUS)}, nil
}

// leaseLeft returns the lease left of an acquired claim, us microseconds
// as the statement answered it, as scanClaim does: a lease lapsed to the
// microsecond is -1 µs, not 0 ("unknown").
func leaseLeft(us int64) time.Duration {
	if us == 0 {
		return -time.Microsecond
	}
	return time.Duration(us) * time.Microsecond
}

// prepare prepares sqls on the Tx's connection, once per connection, when
// it runs in pgx's default QueryExecModeCacheStatement. pgx forgets the
// statements of its statement cache that were in a batch that failed, and
// prepares them again on their next use (two round trips more), while the
// claim batch fails on purpose whenever the claim is not acquired;
// statements prepared under their own text are used by batches the same
// way but are not in that cache. The other modes are left as they are:
// they were chosen not to keep prepared statements (PgBouncer, ...).
func (t *Tx) prepare(ctx context.Context, sqls ...string) error {
	if !t.store.cacheStatements {
		return nil
	}
	conn := t.pgxConn
	for _, sql := range sqls {
		if _, err := conn.Prepare(ctx, sql, sql); err != nil {
			return err
		}
	}
	return nil
}

// leftIdle checks that a claim batch that did not acquire left no
// transaction open, and rolls back one that it did leave (not expected).
func (t *Tx) leftIdle(ctx context.Context, tx pgx.Tx) error {
	if t.conn.Conn().PgConn().TxStatus() == 'I' {
		return nil
	}
	return tx.Rollback(ctx)
}

// beginThenClaim is the claim of a session whose default isolation level
// is not read committed, or that defaults to read only: BEGIN ISOLATION
// LEVEL READ COMMITTED READ WRITE in a round trip of its own, then the
// claim inside the transaction block.
func (t *Tx) beginThenClaim(ctx context.Context, k idempotency.Key, fingerprint string, ttl time.Duration) (idempotency.ClaimResult, error) {
	tx, err := t.conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadWrite})
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	t.tx = tx
	return claim(ctx, txClaimer{tx, t.store.boundSQL}, nil, t.store.sql.claim, k, fingerprint, 0, ttl, false)
}

// isInvalidText reports whether err is one of the failures that the
// statements of transactional mode cause on purpose (see
// sqlstateInvalidText).
func isInvalidText(err error) bool {
	return isSQLState(err, sqlstateInvalidText)
}

// sqlstateReadOnly is PostgreSQL's read_only_sql_transaction.
const sqlstateReadOnly = "25006"

// isReadOnly reports whether one of errs is a write refused in a read-only
// transaction.
func isReadOnly(errs ...error) bool { return anySQLState(sqlstateReadOnly, errs) }

// anySQLState reports whether one of errs is a PostgreSQL error of code.
func anySQLState(code string, errs []error) bool {
	for _, err := range errs {
		if isSQLState(err, code) {
			return true
		}
	}
	return false
}

// isSQLState reports whether err is a PostgreSQL error with SQLSTATE code.
func isSQLState(err error, code string) bool {
	pgErr := pgError(err)
	return pgErr != nil && pgErr.Code == code
}

// isInvalidTextOf reports whether err is the failure that casting text to
// integer causes on purpose.
func isInvalidTextOf(err error, text string) bool {
	return isInvalidText(err) && strings.Contains(pgError(err).Message, text)
}

// txClaimer runs the claim statement in one round trip, inside a
// transaction block, between boundSQL and restoreLockTimeoutSQL, which
// puts back the lock_timeout the transaction had (not the server's
// default, which a SET LOCAL ... TO DEFAULT would set: a session SET, as in
// pgxpool's AfterConnect, would be lost for the handler).
type txClaimer struct {
	tx       pgx.Tx
	boundSQL string
}

func (c txClaimer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	b := &pgx.Batch{}
	b.Queue(c.boundSQL)
	b.Queue(sql, args...)
	b.Queue(restoreLockTimeoutSQL)
	return &batchRow{br: c.tx.SendBatch(ctx, b)}
}

// batchRow reads the second result of a three-statement batch as a pgx.Row.
type batchRow struct{ br pgx.BatchResults }

func (r *batchRow) Scan(dest ...any) error {
	if _, err := r.br.Exec(); err != nil {
		r.br.Close()
		return err
	}
	err := r.br.QueryRow().Scan(dest...)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		r.br.Close()
		return err
	}
	if _, rerr := r.br.Exec(); rerr != nil {
		r.br.Close()
		return rerr
	}
	if cerr := r.br.Close(); cerr != nil {
		return cerr
	}
	return err
}

// Complete implements idempotency.Tx: it keeps resp (a copy) as the outcome,
// which Commit stores in the same round trip as the COMMIT. It returns an
// error wrapping idempotency.ErrStaleToken when this transaction does not
// hold the claim of k with token; a claim whose row the handler changed
// or deleted through the transaction makes Commit fail with that error
// instead, and keeps nothing. A claim whose ttl passed while the handler
// ran (a ttl shorter than the handler) is still this transaction's, whose
// row lock keeps every other claim out until the commit: Commit stores
// the outcome, kept for ttl from then on. A response too large for the
// database (its body, header, scope and key over about 1 GB together,
// or 512 MB in the exec modes that send them as text) is refused with an error wrapping idempotency.ErrResponseNotStorable,
// and nothing is kept: Complete may be called again, with the
// not-replayable outcome the Middleware then stores, and the transaction
// goes on. Sent with the COMMIT, it would have aborted the transaction.
func (t *Tx) Complete(_ context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	ttlUS, err := ttlMicros(ttl)
	if err != nil {
		return fmt.Errorf("pgstore: tx complete: %w", err)
	}
	if t.tx == nil || t.outcome != nil || k != t.claimed || token != t.token {
		return fmt.Errorf("pgstore: tx complete: %w", idempotency.ErrStaleToken)
	}
	scope, key := pgtext.Encode(k.Scope), pgtext.Encode(k.Key)
	header := stampedHeader(token, resp.Header)
	if err := t.store.checkOutcomeSize(resp.Body, header, scope, key); err != nil {
		return fmt.Errorf("pgstore: tx complete: %w", err)
	}
	t.outcome = t.completeArgs(&t.outcomeArgs, scope, key, token, resp.Status, header, bytes.Clone(resp.Body), resp.Oversize, ttlUS)
	return nil
}

// completeArgs fills dst with the arguments of the complete and
// txComplete statements and returns them. The scope, key and ttl that
// the claim batch's arguments hold already (claimArgs) are taken boxed
// from there.
func (t *Tx) completeArgs(dst *[10]any, scope, key string, token int64, status int, header, body []byte, oversize bool, ttlUS int64) []any {
	*dst = [10]any{boxedAs(t.claimArgs[0], scope), boxedAs(t.claimArgs[1], key), token, int32(status), header, body, oversize,
		boxedAs(t.claimArgs[4], ttlUS), t.store.channelArg, t.store.watch.payload(scope, key)}
	return dst[:]
}

// notReplayableArgs returns the arguments of the complete statement that
// records the claim as completed with status 500 and not replayable.
func (t *Tx) notReplayableArgs(scope, key string, ttlUS int64) []any {
	return t.completeArgs(new([10]any), scope, key, t.token, http.StatusInternalServerError, stampedHeader(t.token, nil), nil, true, ttlUS)
}

// boxedAs returns v as an interface value: boxed, when it holds v, or v
// boxed anew (an allocation, for most values).
func boxedAs[T comparable](boxed any, v T) any {
	if b, ok := boxed.(T); ok && b == v {
		return boxed
	}
	return v
}

// blockWasEnded reports whether the transaction block that the claim
// began is no longer open, though neither the Tx nor the handler's
// Rollback ended it: a statement of the handler did (COMMIT, END,
// ROLLBACK, ABORT sent as SQL). It reads the transaction status that pgx
// keeps from the server's last ReadyForQuery: no round trip. Its caller
// holds lk.
func (t *Tx) blockWasEnded() bool {
	if t.blockEnded {
		return true
	}
	if t.tx == nil || (t.h != nil && t.h.ended.Load()) || t.pgxConn.PgConn().TxStatus() != 'I' {
		return false
	}
	t.blockEnded = true
	return true
}

// checkBlock runs after each statement of the handler, which returned
// err, with lk held: it returns err, or, when the statement ended the
// transaction block (blockWasEnded), an error wrapping ErrHandlerEndedTx
// and err, after recordEnded. Every later statement of the handler is
// refused (handlerTx.tx), and so is every statement of its LargeObjects
// (closeLargeObjects), so that none runs outside the block, committed on
// its own.
func (t *Tx) checkBlock(ctx context.Context, err error) error {
	if t.blockEnded || !t.blockWasEnded() {
		return err
	}
	t.closeLargeObjects()
	if rerr := t.recordEnded(ctx); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrHandlerEndedTx, err)
	}
	return ErrHandlerEndedTx
}

// recordEnded records, once, the outcome of a claim whose transaction
// block a statement of the handler ended (see ErrHandlerEndedTx): in a
// statement of its own, outside any block, the claim, if that statement
// committed it, is completed with status 500 and not replayable, so that
// no retry runs again what was committed. A claim rolled back with the
// block is not there to complete: the statement changes nothing. The
// statement runs in a READ WRITE transaction block of its own (two round
// trips more, on this path only): the session may default to read only
// (see beginThenClaim), where it would fail alone. Its caller holds lk; a
// failure is returned (the block rolled back), and Commit or Rollback try
// again.
func (t *Tx) recordEnded(ctx context.Context) error {
	if t.endRecorded || t.token == 0 {
		return nil
	}
	ttlUS, err := ttlMicros(t.ttl)
	if err != nil {
		return err
	}
	scope, key := pgtext.Encode(t.claimed.Scope), pgtext.Encode(t.claimed.Key)
	var tag pgconn.CommandTag
	err = pgx.BeginTxFunc(ctx, t.pgxConn, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadWrite}, func(tx pgx.Tx) error {
		tag, err = tx.Exec(ctx, t.store.sql.complete,
			t.notReplayableArgs(scope, key, ttlUS)...)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: recording the claim that the handler's statement committed: %w", err)
	}
	t.endRecorded, t.notReplayable = true, tag.RowsAffected() == 1
	return nil
}

// endedErr returns the error of a Commit that found the transaction block
// ended by a statement of the handler (see ErrHandlerEndedTx): err, which
// wraps ErrHandlerEndedTx, wrapping idempotency.ErrRecordedNotReplayable
// too when the claim was recorded so, so that the Middleware tells the
// client that retries get 410. Its caller holds lk.
func (t *Tx) endedErr(err error) error {
	if t.notReplayable {
		return fmt.Errorf("pgstore: commit: %w (%w)", err, idempotency.ErrRecordedNotReplayable)
	}
	return fmt.Errorf("pgstore: commit: %w", err)
}

// endedByHandler ends the Tx whose transaction block a statement of the
// handler ended (blockWasEnded): it records the claim (recordEnded) and
// returns the connection, now outside any block, to the pool.
func (t *Tx) endedByHandler(ctx context.Context) error {
	err := t.recordEnded(ctx)
	t.release()
	return err
}

// Commit implements idempotency.Tx: one round trip, the outcome kept by
// Complete and COMMIT. When storing the outcome fails nothing is
// committed; the error wraps idempotency.ErrStaleToken or
// idempotency.ErrResponseNotStorable where that is the cause, and the
// transaction must be rolled back.
//
// It first waits until no statement, rows or batch results of the handler
// hold the transaction (see TxFromContext), refusing from then on every
// statement of the handler that asks for it, or waits; when ctx ends
// first, it fails with an error saying so, and commits nothing. When a statement of the
// handler ended the transaction block, it stores nothing and fails with
// ErrHandlerEndedTx (see there).
func (t *Tx) Commit(ctx context.Context) error {
	if t.finished {
		return fmt.Errorf("pgstore: commit: %w", pgx.ErrTxClosed)
	}
	if err := t.lk.lockEnd(ctx, false); err != nil {
		t.lockLost = true
		return fmt.Errorf("pgstore: commit: %w: %w", errStillHeld, err)
	}
	defer t.lk.unlock()
	if t.finished || (t.h != nil && t.h.ended.Load()) {
		t.release()
		return fmt.Errorf("pgstore: commit: %w", pgx.ErrTxClosed)
	}
	if t.tx == nil {
		t.release() // no claim acquired: nothing to commit
		return nil
	}
	if t.blockWasEnded() {
		// Storing the outcome now would store it outside any block, as if
		// the handler's writes had committed with it.
		if err := t.endedByHandler(ctx); err != nil {
			return t.endedErr(fmt.Errorf("%w: %w", ErrHandlerEndedTx, err))
		}
		return t.endedErr(ErrHandlerEndedTx)
	}
	b := t.newBatch()
	if t.outcome != nil {
		if err := t.prepare(ctx, t.store.commitStatements...); err != nil {
			return fmt.Errorf("pgstore: commit: %w", err)
		}
		t.queue(b, t.store.sql.txComplete, t.outcome...)
	}
	t.queue(b, "COMMIT")
	br := t.tx.SendBatch(ctx, b)
	var err error
	if t.outcome != nil {
		// The statement's row (NULL) says nothing that its error does
		// not: a stale claim fails it.
		_, err = br.Exec()
		switch {
		case isInvalidTextOf(err, switchedText):
			// The handler's statement ended the block and began another
			// (see writtenHereSQL): the outcome is not stored in it.
			_ = br.Close()
			err = t.endSwitched(ctx, nil)
			t.release()
			return t.endedErr(err)
		case isTooLarge(err):
			err = fmt.Errorf("%w: %w", idempotency.ErrResponseNotStorable, err)
		case isInvalidText(err):
			err = idempotency.ErrStaleToken
		}
	}
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && tag.String() == "ROLLBACK" {
		err = pgx.ErrTxCommitRollback // the handler left the transaction failed
	}
	if err != nil {
		switch {
		case isUnprepared(err):
			t.discardConn() // see there: nothing was committed
		case t.pgxConn.PgConn().TxStatus() == 'I':
			t.release() // the transaction is over: nothing to roll back
		}
		return fmt.Errorf("pgstore: commit: %w", err)
	}
	t.release()
	return nil
}

// Rollback implements idempotency.Tx. It returns nil after Commit or a
// previous Rollback. Like Commit it waits until no statement of the
// handler holds the transaction, unless the Commit's wait already ended
// with its context; when that wait does not end in time, it closes the
// connection under the statement (see abandon), and PostgreSQL rolls the
// transaction back. It does not wait for rows or batch results of the
// handler that are open, nor for a CopyFrom's source: a handler that
// failed or panicked with them open may never close them, and what a
// goroutine still reads is rolled back anyway. It closes the connection
// under them at once, and returns an error saying so.
func (t *Tx) Rollback(ctx context.Context) error {
	if t.finished {
		return nil
	}
	if t.lockLost {
		t.abandon()
		return nil // Commit reported it
	}
	if err := t.lk.lockEnd(ctx, true); err != nil {
		t.abandon()
		if errors.Is(err, errRowsOpen) || errors.Is(err, errCopyBusy) {
			return fmt.Errorf("pgstore: rollback: %w (the connection was closed)", err)
		}
		return fmt.Errorf("pgstore: rollback: %w: %w", errStillHeld, err)
	}
	defer t.lk.unlock()
	if t.blockWasEnded() {
		if err := t.endedByHandler(ctx); err != nil {
			return fmt.Errorf("pgstore: rollback: %w", err)
		}
		return nil
	}
	var err error
	// A connection pgx closed (a statement of the handler's cut short by
	// its context: the client left) ended its session, which PostgreSQL
	// rolled back: nothing is left to roll back, and pgx's Rollback would
	// only fail with "conn closed".
	switch {
	case t.tx == nil || t.h != nil && t.h.ended.Load() || t.tx.Conn().IsClosed():
	case t.token != 0 && t.suspect.Load():
		err = t.rollbackChecked(ctx) // see there
	default:
		err = t.tx.Rollback(ctx)
	}
	t.release()
	if err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("pgstore: rollback: %w", err)
	}
	return nil
}

// errStillHeld is the error of a Commit or Rollback whose wait for the
// handler's statement, rows or batch results (see TxFromContext) ended
// with its context.
var errStillHeld = errors.New("pgstore: a statement, rows (Query) or batch results (SendBatch) of the handler still hold the transaction (rows and results must be closed)")

// abandon ends the Tx while its lock is held, by rows that the handler
// never closed or a goroutine that still reads them or runs a statement:
// it takes the connection out of the pool and closes its network
// connection, without touching the state of the pgx connection, which the
// holder may still use (its next read fails, and its Close lets the lock
// go); PostgreSQL rolls the transaction back. Waiting for the holder
// might never end, and releasing the connection to the pool would hand it
// to another request while the holder still uses it.
func (t *Tx) abandon() {
	t.finished = true
	if t.h != nil {
		t.h.ended.Store(true)
	}
	if c := t.takeConn(); c != nil {
		c.Hijack()
		_ = t.pgxConn.PgConn().Conn().Close()
	}
}

// takeConn returns the Tx's connection, nil once it went back to the pool
// or was taken, and leaves the Tx without it.
func (t *Tx) takeConn() *pgxpool.Conn {
	t.connMu.Lock()
	defer t.connMu.Unlock()
	c := t.conn
	t.conn = nil
	return c
}

// release ends the Tx and returns its connection to the pool (which closes
// a connection left inside a transaction block), or closes it when a
// statement of the handler may have changed a setting of its session
// (sessionSet): the pool's next user then gets a new session, set up as
// the pool sets them up.
func (t *Tx) release() {
	t.finished = true
	if t.h != nil {
		t.h.ended.Store(true)
	}
	t.closeLargeObjects()
	c := t.takeConn()
	switch {
	case c == nil:
	case t.sessionSet:
		closeConn(c)
	default:
		c.Release()
	}
}

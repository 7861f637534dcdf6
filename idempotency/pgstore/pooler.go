package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pooler says what sits between the pool given to New and PostgreSQL, for
// the check of the pool's query exec mode (see the package documentation,
// "Exec modes and connection poolers"). The zero value, PoolerDetect,
// detects a pooler. A Pooler is a plain value, safe to share.
type Pooler int

const (
	// PoolerDetect, the default, detects a pooler on a connection of the
	// pool, once per Store and only when the pool's exec mode is one that
	// a transaction pooler breaks (pgx.QueryExecModeCacheStatement, the
	// default, and pgx.QueryExecModeDescribeExec): a connection whose
	// server process is not the one the connection announced at start-up
	// goes through a pooler (PgBouncer and its kind answer cancel requests
	// themselves, so they announce a process id of their own). Behind one,
	// CreateSchema and the Store's methods refuse those modes with an
	// *ExecModeError. The LISTEN connection for waiting requests is
	// checked the same way in every mode, and not used through a pooler
	// (see WithListenConfig).
	PoolerDetect Pooler = iota
	// PoolerSession declares a pooler in session mode (PgBouncer's
	// pool_mode=session), or none: a client keeps its server connection,
	// so every exec mode and LISTEN are safe. Nothing is checked.
	PoolerSession
	// PoolerTransactionPrepared declares a transaction pooler that keeps
	// named prepared statements per client (PgBouncer 1.21 or later with
	// max_prepared_statements above 0), which makes the statement cache,
	// pgx.QueryExecModeCacheStatement, safe. pgx.QueryExecModeDescribeExec
	// is still refused behind a pooler: it prepares the unnamed statement
	// in one round trip and executes it in the next, which such a pooler
	// may send to another server connection.
	PoolerTransactionPrepared
)

// WithPooler declares what sits between the pool and PostgreSQL (see
// Pooler); the default is PoolerDetect.
func WithPooler(p Pooler) Option {
	return func(c *config) { c.pooler = p }
}

// WithListenConfig sets the connection configuration of the LISTEN
// connection that wakes waiting requests (see Store.Watch). Nil, the
// default, means the configuration of the pool given to New. Behind a
// transaction pooler (PgBouncer's pool_mode=transaction) a LISTEN is
// lost, as the pooler hands the server connection that listens to other
// clients: give the configuration of a direct connection to PostgreSQL,
// or of one through a session-mode pool. Without it, a Store that detects
// a pooler (PoolerDetect) does not listen, logs why (WithLogger), and
// waiting requests poll.
func WithListenConfig(cfg *pgx.ConnConfig) Option {
	return func(c *config) { c.listenConfig = cfg }
}

// ErrUnsafeExecMode is the cause of the *ExecModeError that CreateSchema
// and the Store's methods return when the pool's query exec mode is not
// safe behind the pooler found between the pool and PostgreSQL.
var ErrUnsafeExecMode = errors.New("pgstore: query exec mode unsafe behind a connection pooler")

// ErrListenBehindPooler is the cause of the failure of the LISTEN
// connection, logged, when it would go through a pooler (see
// WithListenConfig).
var ErrListenBehindPooler = errors.New("pgstore: LISTEN through a connection pooler loses notifications")

// ExecModeError reports a pool whose query exec mode a pooler in front of
// PostgreSQL breaks: pgx.QueryExecModeCacheStatement fails with
// `prepared statement "stmtcache_..." already exists` (or does not exist)
// behind a transaction pooler, and pgx.QueryExecModeDescribeExec may
// execute another client's statement. errors.Is(err, ErrUnsafeExecMode)
// holds for it. Its fields are not changed after it is returned, so it is
// safe to read from several goroutines.
type ExecModeError struct {
	// Mode is the pool's pgx.ConnConfig.DefaultQueryExecMode.
	Mode pgx.QueryExecMode
	// AnnouncedPID is the server process id the connection announced at
	// start-up (its BackendKeyData), ServerPID the one pg_backend_pid()
	// answered: they differ behind a pooler.
	AnnouncedPID, ServerPID uint32
}

func (e *ExecModeError) Error() string {
	return fmt.Sprintf("pgstore: the pool's query exec mode %q is unsafe behind the connection pooler in front of PostgreSQL "+
		"(the connection announced server process %d, the server is process %d): "+
		"use pgx.QueryExecModeExec (default_query_exec_mode=exec in the URL) or pgx.QueryExecModeSimpleProtocol, "+
		"or declare the pooler with pgstore.WithPooler", e.Mode, e.AnnouncedPID, e.ServerPID)
}

// Unwrap returns ErrUnsafeExecMode.
func (e *ExecModeError) Unwrap() error { return ErrUnsafeExecMode }

// unsafeMode reports whether mode breaks behind pooler p when p is a
// transaction pooler.
func unsafeMode(p Pooler, mode pgx.QueryExecMode) bool {
	switch p {
	case PoolerSession:
		return false
	case PoolerTransactionPrepared:
		return mode == pgx.QueryExecModeDescribeExec
	default:
		return mode == pgx.QueryExecModeCacheStatement || mode == pgx.QueryExecModeDescribeExec
	}
}

// PoolCheck is the check of a pool's query exec mode that a Store makes
// before its first statement (see WithPooler and the package
// documentation, "Exec modes and connection poolers"), for other code that
// runs statements of its own on a pool, such as mockserver/pgledger. Create
// it with NewPoolCheck; the zero value is not usable. It is safe for
// concurrent use by multiple goroutines; Err is the method to call.
type PoolCheck struct {
	pool   *pgxpool.Pool
	needed bool                  // the mode is unsafe behind a transaction pooler
	result atomic.Pointer[error] // set once the check came to a verdict
	sem    chan struct{}         // one probe at a time
}

// NewPoolCheck returns the check of pool, whose server connections a
// pooler p sits in front of (PoolerDetect: look for one). It does not
// touch the pool.
func NewPoolCheck(pool *pgxpool.Pool, p Pooler) *PoolCheck {
	return &PoolCheck{pool: pool, needed: unsafeMode(p, pool.Config().ConnConfig.DefaultQueryExecMode), sem: make(chan struct{}, 1)}
}

// Err returns nil when the pool's exec mode is safe where it connects, an
// *ExecModeError when a pooler makes it unsafe, and the error of the probe
// when it could not tell (the next call probes again). It probes at most
// once per verdict, with one statement over the simple protocol, and only
// when the mode is one that a pooler may break; otherwise it costs nothing.
func (c *PoolCheck) Err(ctx context.Context) error {
	if !c.needed {
		return nil
	}
	if r := c.result.Load(); r != nil {
		return *r
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.sem }()
	if r := c.result.Load(); r != nil {
		return *r
	}
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	announced, server, err := serverPIDs(ctx, conn.Conn())
	if err != nil {
		return err
	}
	var verdict error
	if announced != server {
		verdict = &ExecModeError{Mode: c.pool.Config().ConnConfig.DefaultQueryExecMode, AnnouncedPID: announced, ServerPID: server}
	}
	c.result.Store(&verdict)
	return verdict
}

// checkPool is the Store's PoolCheck (see PoolCheck.Err).
func (s *Store) checkPool(ctx context.Context) error { return s.check.Err(ctx) }

// serverPIDs returns the server process id conn announced at start-up and
// the one the server answers now. The probe goes over the simple
// protocol, so that it prepares nothing on a server connection that a
// pooler may share.
func serverPIDs(ctx context.Context, conn *pgx.Conn) (announced, server uint32, err error) {
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()", pgx.QueryExecModeSimpleProtocol).Scan(&server); err != nil {
		return 0, 0, fmt.Errorf("pgstore: look for a connection pooler: %w", err)
	}
	return conn.PgConn().PID(), server, nil
}

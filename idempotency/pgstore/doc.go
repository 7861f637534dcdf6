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
// when a completed or live entry is in the way.
//
// # Transactional mode
//
// NewTx returns a *TxStore implementing idempotency.TxStore. The middleware
// then opens one transaction per protected request, claims the key inside it,
// hands the transaction to the handler (TxFromContext), stores the response in
// it and commits: the business writes and the idempotency record become
// visible together, or not at all. A 5xx, a panic or a failed commit rolls
// everything back and leaves the key free. No lease is needed: a crashed
// instance's connection drops, PostgreSQL rolls its transaction back, and the
// key is free at once. A concurrent duplicate blocks on the uncommitted row
// (bounded by the lock timeout, WithLockTimeout) and then replays the
// committed outcome, acquires the key if the first transaction rolled back, or
// reports the operation in progress when the wait times out.
//
// Choose transactional mode when every side effect of the handler is a write
// to the same PostgreSQL database, made through the transaction from
// TxFromContext: it is then exactly-once without leases or half-done work.
// Do not choose it when the handler has external side effects (payments
// through another API, e-mails, messages to a broker, writes to another
// database): those cannot be rolled back with the transaction, so a rollback
// after they happened lets a retry repeat them. Use lease mode there, and make
// the external calls idempotent themselves. Transactional mode also holds a
// database connection and a row lock for the whole handler, and a waiting
// duplicate holds a connection for up to the lock timeout, so keep such
// handlers short and size the pool for the requests in flight. Do not mix both modes on one table: a lease-mode Claim would
// wait without a lock timeout behind an uncommitted transactional claim.
//
// # Schema and cleanup
//
// CreateSchema creates the table, its identity sequence and an index on
// expires_at (safe to call repeatedly and concurrently); Schema returns the
// same SQL for migration tools. Expired rows are treated as absent at once and
// are deleted in bounded batches through the expires_at index by
// DeleteExpired, or in the background by StartReaper.
package pgstore

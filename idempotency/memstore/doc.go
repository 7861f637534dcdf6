// Package memstore is an in-memory idempotency.Store.
//
// It keeps entries in the memory of one process, so it protects a
// single-instance application and serves tests; it does not protect an
// application that runs as several instances, because two retries that land
// on two instances each see an empty store. Use redisstore or pgstore there.
//
// Entries live in 64 shards, each behind its own mutex, chosen by a hash of
// the scope and the key. Expired entries are dropped lazily when they are
// touched and by a background sweep that Close stops. Each shard keeps its
// expiry times in a min-heap, so the sweep only visits expiries that are due,
// never the live entries, and releases the shard's lock after every batch
// of 256. The Store implements idempotency.Watcher: Complete and Release
// wake the requests waiting for the entry at once.
//
// # Bounds
//
// The store holds at most DefaultMaxEntries entries and DefaultMaxBytes of
// estimated heap unless WithMaxEntries and WithMaxBytes say otherwise. The
// estimate counts the bytes of each key, fingerprint, stored header and
// body, plus a per-entry overhead measured on the Go runtime (map slot,
// entry, expiry queue item, response struct), and counters shared by all
// shards keep it exact under concurrency. At a bound the store refuses new
// work and never evicts: Claim of a new key fails with ErrFull (the
// idempotency Middleware answers 503 with Retry-After, and the handler does
// not run), and Complete of a response that does not fit fails with
// idempotency.ErrResponseNotStorable (the Middleware then records the
// operation as completed but not replayable). Every claim sets aside room
// for that not-replayable record, so it always fits. Expiry and Release give
// the room back; a Claim or Complete that finds the store full sweeps the
// expired entries first. Whatever the bounds, a body of 2 GiB or more is not
// kept: Complete fails with idempotency.ErrResponseNotStorable likewise.
package memstore

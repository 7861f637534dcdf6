// Package memstore is an in-memory idempotency.Store.
//
// It keeps entries in the memory of one process, so it protects a
// single-instance application and serves tests; it does not protect an
// application that runs as several instances, because two retries that land
// on two instances each see an empty store. Use redisstore or pgstore there.
//
// Entries live in 64 shards, each behind its own mutex, chosen by a hash of
// the scope and the key. Expired entries are dropped lazily when they are
// touched and by a background sweep that Close stops.
package memstore

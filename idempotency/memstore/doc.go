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
// of 256.
package memstore

// Package scenario holds end-to-end scenarios for idempotency stores, for
// anyone who writes one: several application instances, each with its own
// Middleware, over one shared store, under duplicates, crashes and store
// faults. The memory, Redis and PostgreSQL store tests run the same
// functions, so the three are held to the same proof; a store of your own
// can be too.
//
//   - ExactlyOnce: many concurrent duplicates per key across instances; one
//     execution per key, every other answer a 409 or a byte-identical
//     replay.
//   - Ledger: debits through the Middleware, with duplicated sends and
//     dropped responses retried by saferetry.Transport; final balances equal
//     the sum of the distinct operations.
//   - Crash: an instance freezes in the middle of a handler and is cut off;
//     another instance takes the key over and the frozen one's late
//     Complete, or Release after a failure, is refused.
//   - KeyReused: a key sent again with another body, across instances,
//     while the first request runs and after it completed: a 422 (or, from
//     a TxStore while the first is uncommitted, a 409), never an execution.
//   - StoreFaults: the store slow (latency of lease/10 and lease/5, and over
//     the lease, then fast again), a paused holder and its fenced write, a store cut during
//     Complete, a thousand waiters on a small pool, through a TCP proxy
//     between the instances and the store's server.
//   - WatchAcrossInstances: a store's idempotency.Watcher wakes a waiter on
//     another instance.
//   - FastPathAnswers: a store's replay fast path answers a claim as the
//     claim itself does, whatever state the key is in.
//   - ReplayPathFollowsTheMix: a store reads first while replays are most
//     of its claims, and claims straight away otherwise.
//   - ParallelFirstExecutions: a benchmark of whole protected requests.
//
// The functions take a *testing.T (or *testing.B) and report through it.
// The conformance suite of a single store is package storetest.
package scenario

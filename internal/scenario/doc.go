// Package scenario holds end-to-end test scenarios that every idempotency
// store runs: several application instances, each with its own Middleware,
// over one shared store. The memory, Redis and PostgreSQL store tests call
// the same functions, so the three are held to the same proof.
//
//   - ExactlyOnce: many concurrent duplicates per key across instances; one
//     execution per key, every other answer a 409 or a byte-identical replay.
//   - Ledger: debits through the Middleware, with duplicated sends and
//     dropped responses retried by saferetry.Transport; final balances equal
//     the sum of the distinct operations.
//   - Crash: an instance freezes in the middle of a handler and is cut off;
//     another instance takes the key over and the frozen one's late
//     completion is refused.
//
// The functions take a *testing.T and report through it; they are test
// helpers, not library code, and live in internal so that they are not part
// of the public API.
package scenario

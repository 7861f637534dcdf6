package pgstore

import (
	"context"

	"github.com/saferetry/saferetry/idempotency"
)

// claimAnswer keeps what a claim statement (the claim statement or the
// upsert) answered, whether it acquired and the claim's token, as pgx
// scans them, so that a claim whose answer came back before a panic cut
// the Claim short can be released (see releaseAnswered): pgx scans the
// row, then closes it, which calls the tracer's TraceQueryEnd, whose
// panic would lose the answer with scanClaim's frame. The zero value
// holds no claim; it is used by one goroutine. It holds the whole row
// the statement answers, so that the row is scanned into one allocation
// (pgx's Scan takes its targets as pointers in interfaces, which move
// them to the heap).
type claimAnswer struct {
	acquired bool
	token    int64
	tookOver bool
	row      entryRow // the entry in the way, when the statement did not acquire
}

// releaseAnswered releases the claim that got holds when a panic (or
// runtime.Goexit) cut its Claim short after the answer came back: the key
// would stay held, every retry answered 409, for the whole lease. The
// token comes from the table's identity sequence, never drawn twice, and
// a release by it is fenced like any Release (the token and the entry in
// progress), so it frees that claim and nothing else, even one taken
// over since, and does nothing when the claim was not committed. A
// statement with no answer (the tracer panicked before it ran, or it
// failed) acquired nothing that can be told, and is left alone. The
// release runs as the panic unwinds, without recovering it, so that the
// caller's recover gets the panic and its stack as they were; a panic of
// the release's own (the same tracer) is dropped. ctx is the one the
// statement ran under, which does not end before the claim's lease (see
// Store.acquire).
func (s *Store) releaseAnswered(ctx context.Context, k idempotency.Key, got *claimAnswer) {
	if !got.acquired {
		return
	}
	defer func() { _ = recover() }() // the release's own panic: see above
	_ = s.Release(ctx, k, got.token) // it failed: the claim lapses with its lease
}

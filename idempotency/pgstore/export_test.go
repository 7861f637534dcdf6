package pgstore

import (
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/pgtext"
	"github.com/saferetry/saferetry/internal/replaymix"
)

// InsertsFirst reports whether s begins its next claim batch with a plain
// INSERT (see TxStore.firsts), for the tests of package pgstore_test.
func InsertsFirst(s *TxStore) bool { return s.firsts.ReadFirst() }

// UpsertsFirst reports whether s begins its next claim with the upsert
// statement (see Store.upserts), for the tests of package pgstore_test.
func UpsertsFirst(s *Store) bool { return s.upserts.ReadFirst() }

// ClaimStatementOnly makes s claim with the claim statement alone from
// then on (never the upsert first), for tests that compare the two.
func ClaimStatementOnly(s *Store) { s.upserts = replaymix.New(replaymix.Never, 1, 1) }

// ErrNonPositiveLease is the error Claim and Renew wrap for a lease they
// refuse.
var ErrNonPositiveLease = errNonPositiveLease

// SetMaxOutcomeBytes lowers the bound on a completion's bytes (see
// maxOutcomeBytes) to n for the test.
func SetMaxOutcomeBytes(tb testing.TB, n int) {
	old := maxOutcomeBytes
	maxOutcomeBytes = n
	tb.Cleanup(func() { maxOutcomeBytes = old })
}

// SetWatchIdle makes s's LISTEN connection wait d, not watchset.Idle, for
// a notification before it asks whether anybody still waits and pings the
// server, and d, not watchset.PingWait, for the ping's answer. Call it
// before the first Watch.
func SetWatchIdle(s *Store, d time.Duration) { s.watch.idle, s.watch.pingWait = d, d }

// ErrStillHeld is the error that Commit and Rollback wrap when their wait
// for the handler's statement, rows or batch results ended with their
// context.
var ErrStillHeld = errStillHeld

// ReadsFirst reports whether s reads a key before claiming it on its next
// claim (the replay fast path, see Store.replay), for the tests of package
// pgstore_test.
func ReadsFirst(s *Store) bool { return s.replay.ReadFirst() }

// Notification returns the channel and the payload of the notification
// that the completion of k's watched entry on s sends.
func Notification(s *Store, k idempotency.Key) (channel, payload string) {
	return s.watch.channel(), s.watch.payload(pgtext.Encode(k.Scope), pgtext.Encode(k.Key))
}

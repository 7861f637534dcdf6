package scenario

import (
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// Answer is what a claim answered, less what two claims of keys in the
// same state may answer differently (the token, the lease left, the
// headers): what a store's replay fast path must answer as the claim
// itself would. It is a plain value, compared with ==; it holds no
// references, so copies are safe to use from any goroutine.
type Answer struct {
	Acquired, TookOver bool
	State              idempotency.State
	Fingerprint, Body  string
}

// AnswerOf returns the Answer in r.
func AnswerOf(r idempotency.ClaimResult) Answer {
	a := Answer{Acquired: r.Acquired, TookOver: r.TookOver, State: r.Entry.State, Fingerprint: r.Entry.Fingerprint}
	if r.Entry.Response != nil {
		a.Body = string(r.Entry.Response.Body)
	}
	return a
}

// KeyState is a state that a key can be in when a claim arrives, for
// FastPathAnswers: Setup leaves k in the state Name says, and Want is what
// a claim of k with fingerprint "fp" answers then. FastPathAnswers calls
// Setup from one goroutine at a time, so it need not be safe for
// concurrent use.
type KeyState struct {
	Name  string
	Setup func(t *testing.T, k idempotency.Key)
	Want  Answer
}

// FastPathAnswers checks that fast, a store with a replay fast path (an
// answer for completed entries read before, or instead of, the claim's
// write), answers a claim as plain, the same store without it, does: in
// a subtest per state, it puts a key of plain's and then a key of fast's
// in that state and claims each with claim, which claims k in s with
// fingerprint "fp" (and the lease and ttl the store's test wants) and
// fails t on an error. Both answers must be the state's Want. The keys
// are in scope, named after the state and the store ("without" or "with"
// the fast path). Setup is not handed a store: plain and fast must see
// the same data (one table, one Redis prefix), or Setup must tell the two
// keys apart by name; no two claims use the same key.
func FastPathAnswers(t *testing.T, plain, fast idempotency.Store, scope string, states []KeyState,
	claim func(t *testing.T, s idempotency.Store, k idempotency.Key) idempotency.ClaimResult) {
	t.Helper()
	for _, st := range states {
		t.Run(st.Name, func(t *testing.T) {
			for _, s := range []struct {
				name  string
				store idempotency.Store
			}{{"without", plain}, {"with", fast}} {
				k := idempotency.Key{Scope: scope, Key: st.Name + "/" + s.name}
				st.Setup(t, k)
				if got := AnswerOf(claim(t, s.store, k)); got != st.Want {
					t.Errorf("%s the fast path: Claim = %+v, want %+v", s.name, got, st.Want)
				}
			}
		})
	}
}

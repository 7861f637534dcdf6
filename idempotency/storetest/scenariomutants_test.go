package storetest_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
	"github.com/saferetry/saferetry/internal/testkit"
)

// envScenarioMutant names the broken store TestScenarioMutantChild runs the
// scenarios on ("none" for a plain memstore); unset, that test skips.
const envScenarioMutant = "SAFERETRY_SCENARIO_MUTANT"

// More broken stores, beside those of storetest_test.go: each a memstore
// with one rule that the scenarios' guarantee (one execution, no answer
// lost, fencing) rests on taken out.

// renewsNothing answers every Renew with success and extends nothing.
type renewsNothing struct{ idempotency.Store }

func (renewsNothing) Renew(ctx context.Context, _ idempotency.Key, _ int64, _ time.Duration) error {
	return ctx.Err()
}

// shortLeases keeps a tenth of each lease it is given and reports the
// whole of it: its ClaimResult.LeaseRemaining is larger than the lease.
type shortLeases struct{ idempotency.Store }

func (s shortLeases) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, k, fp, lease/10, ttl)
	if res.Acquired {
		res.LeaseRemaining = lease
	}
	return res, err
}

func (s shortLeases) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	return s.Store.Renew(ctx, k, token, lease/10)
}

// releasesAnyToken releases the key's current claim whatever token it is
// given, as staleWrites completes it.
type releasesAnyToken struct{ idempotency.Store }

func (s releasesAnyToken) Release(ctx context.Context, k idempotency.Key, _ int64) error {
	e, found, err := s.Get(ctx, k)
	if err != nil || !found {
		return err
	}
	return s.Store.Release(ctx, k, e.Token)
}

// losesAnswers drops the outcome it is given: its Complete releases the
// claim and reports success.
type losesAnswers struct{ idempotency.Store }

func (s losesAnswers) Complete(ctx context.Context, k idempotency.Key, token int64, _ idempotency.Response, _ time.Duration) error {
	return s.Store.Release(ctx, k, token)
}

// keepsNoBody keeps the outcome's status and headers, not its body.
type keepsNoBody struct{ idempotency.Store }

func (s keepsNoBody) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	resp.Body = nil
	return s.Store.Complete(ctx, k, token, resp, ttl)
}

// ignoresFingerprints claims every key with one fingerprint and reports
// the caller's own in the entry that stood in the way.
type ignoresFingerprints struct{ idempotency.Store }

func (s ignoresFingerprints) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, k, "any", lease, ttl)
	if !res.Acquired && res.Entry.State != 0 {
		res.Entry.Fingerprint = fp
	}
	return res, err
}

// echoesFingerprint reports the caller's fingerprint, not the stored one,
// in the entry that stood in the way of a claim, when that entry is in
// the state it breaks (in progress, or completed, as a replay fast path
// that never compares would): the claim is answered as a 409 or a replay
// of someone else's operation instead of a 422.
type echoesFingerprint struct {
	idempotency.Store
	state idempotency.State
}

func (s echoesFingerprint) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, k, fp, lease, ttl)
	if err == nil && !res.Acquired && res.Entry.State == s.state {
		res.Entry.Fingerprint = fp
	}
	return res, err
}

// completedAsAbsent is a replay fast path that takes a completed entry for
// an absent one: it answers the claim of a completed key as acquired (with
// a token that nothing holds), so that the operation runs again.
type completedAsAbsent struct{ idempotency.Store }

func (s completedAsAbsent) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, k, fp, lease, ttl)
	if err == nil && !res.Acquired && res.Entry.State == idempotency.StateCompleted {
		return idempotency.ClaimResult{Acquired: true, Token: res.Entry.Token + 1<<32, LeaseRemaining: lease}, nil
	}
	return res, err
}

// staleReads answers Get, and a Claim it refuses, with the first entry it
// read for the key, as a cache never invalidated or a lagging replica
// would.
type staleReads struct {
	idempotency.Store
	mu   sync.Mutex
	seen map[idempotency.Key]idempotency.Entry
}

func (s *staleReads) remember(k idempotency.Key, e idempotency.Entry) idempotency.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.seen[k]; ok {
		return old
	}
	s.seen[k] = e
	return e
}

func (s *staleReads) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, k, fp, lease, ttl)
	if err == nil && !res.Acquired {
		res.Entry = s.remember(k, res.Entry)
	}
	return res, err
}

func (s *staleReads) Get(ctx context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	e, found, err := s.Store.Get(ctx, k)
	if err == nil && found {
		e = s.remember(k, e)
	}
	return e, found, err
}

// reusesTokens hands every claim of a key the token of the key's first
// claim, also after a takeover, as a store that keeps a key's token in a
// field it never increments would: the newest claim cannot be told from
// the older ones it superseded.
type reusesTokens struct {
	idempotency.Store
	mu    sync.Mutex
	first map[idempotency.Key]int64
}

// token returns k's first token, remembering inner as that when k has none.
func (s *reusesTokens) token(k idempotency.Key, inner int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.first[k]; ok {
		return f
	}
	s.first[k] = inner
	return inner
}

// current returns the token that the memstore holds k's claim with, when
// token is k's first token; any other token as it is.
func (s *reusesTokens) current(ctx context.Context, k idempotency.Key, token int64) int64 {
	s.mu.Lock()
	f, ok := s.first[k]
	s.mu.Unlock()
	if !ok || token != f {
		return token
	}
	if e, found, err := s.Store.Get(ctx, k); err == nil && found {
		return e.Token
	}
	return token
}

func (s *reusesTokens) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, k, fp, lease, ttl)
	switch {
	case err != nil:
	case res.Acquired:
		res.Token = s.token(k, res.Token)
	default:
		res.Entry.Token = s.token(k, res.Entry.Token)
	}
	return res, err
}

func (s *reusesTokens) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	return s.Store.Renew(ctx, k, s.current(ctx, k, token), lease)
}

func (s *reusesTokens) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	return s.Store.Complete(ctx, k, s.current(ctx, k, token), resp, ttl)
}

func (s *reusesTokens) Release(ctx context.Context, k idempotency.Key, token int64) error {
	return s.Store.Release(ctx, k, s.current(ctx, k, token))
}

func (s *reusesTokens) Get(ctx context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	e, found, err := s.Store.Get(ctx, k)
	if err == nil && found {
		e.Token = s.token(k, e.Token)
	}
	return e, found, err
}

// scenarioBroken are the broken stores the scenarios run on: those of
// storetest_test.go that break a rule the scenarios rest on, and the ones
// above.
var scenarioBroken = map[string]func(idempotency.Store) idempotency.Store{
	"none":                func(s idempotency.Store) idempotency.Store { return s },
	"stealingClaims":      broken["stealingClaims"],
	"staleWrites":         broken["staleWrites"],
	"deafWatcher":         broken["deafWatcher"],
	"renewsNothing":       func(s idempotency.Store) idempotency.Store { return renewsNothing{s} },
	"shortLeases":         func(s idempotency.Store) idempotency.Store { return shortLeases{s} },
	"releasesAnyToken":    func(s idempotency.Store) idempotency.Store { return releasesAnyToken{s} },
	"losesAnswers":        func(s idempotency.Store) idempotency.Store { return losesAnswers{s} },
	"keepsNoBody":         func(s idempotency.Store) idempotency.Store { return keepsNoBody{s} },
	"ignoresFingerprints": func(s idempotency.Store) idempotency.Store { return ignoresFingerprints{s} },
	"echoesFingerprintInProgress": func(s idempotency.Store) idempotency.Store {
		return echoesFingerprint{s, idempotency.StateInProgress}
	},
	"echoesFingerprintCompleted": func(s idempotency.Store) idempotency.Store {
		return echoesFingerprint{s, idempotency.StateCompleted}
	},
	"completedAsAbsent": func(s idempotency.Store) idempotency.Store { return completedAsAbsent{s} },
	"staleReads": func(s idempotency.Store) idempotency.Store {
		return &staleReads{Store: s, seen: make(map[idempotency.Key]idempotency.Entry)}
	},
	"reusesTokens": func(s idempotency.Store) idempotency.Store {
		return &reusesTokens{Store: s, first: make(map[idempotency.Key]int64)}
	},
}

// newMem returns a memstore that the test closes.
func newMem(t *testing.T) *memstore.Store {
	s := memstore.New()
	t.Cleanup(func() { s.Close() })
	return s
}

// TestScenarioMutantChild runs the scenarios, each as a subtest, on the
// broken store named by envScenarioMutant. It is run only as a child
// process of TestScenariosCatchBrokenStores.
func TestScenarioMutantChild(t *testing.T) {
	wrap, ok := scenarioBroken[os.Getenv(envScenarioMutant)]
	if !ok {
		t.Skip("run by TestScenariosCatchBrokenStores only")
	}
	t.Run("ExactlyOnce", func(t *testing.T) { scenario.ExactlyOnce(t, wrap(newMem(t))) })
	t.Run("ExactlyOnceWaitForResult", func(t *testing.T) {
		scenario.ExactlyOnce(t, wrap(newMem(t)), idempotency.WithWaitForResult(2*time.Second))
	})
	t.Run("Ledger", func(t *testing.T) { scenario.Ledger(t, wrap(newMem(t)), scenario.NewMemBook()) })
	t.Run("Crash", func(t *testing.T) { scenario.Crash(t, wrap(newMem(t)), scenario.CrashLease) })
	t.Run("KeyReused", func(t *testing.T) { scenario.KeyReused(t, wrap(newMem(t))) })
	t.Run("WatchAcrossInstances", func(t *testing.T) {
		s := newMem(t)
		waiter := wrap(s)
		if _, ok := waiter.(idempotency.Watcher); !ok {
			// A broken store that hides the Watch it does not break.
			waiter = struct {
				idempotency.Store
				idempotency.Watcher
			}{waiter, s}
		}
		scenario.WatchAcrossInstances(t, s, waiter)
	})
	t.Run("StoreFaults", func(t *testing.T) { storeFaultsOn(t, wrap) })
	t.Run("FastPathAnswers", func(t *testing.T) {
		s := newMem(t)
		scenario.FastPathAnswers(t, s, wrap(s), "fast", fastPathStates(s), func(t *testing.T, s idempotency.Store, k idempotency.Key) idempotency.ClaimResult {
			r, err := s.Claim(context.Background(), k, "fp", time.Minute, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return r
		})
	})
}

// fastPathStates are the states FastPathAnswers puts memstore's keys in.
func fastPathStates(s idempotency.Store) []scenario.KeyState {
	ctx := context.Background()
	claim := func(t *testing.T, k idempotency.Key, fp string) int64 {
		r, err := s.Claim(ctx, k, fp, time.Minute, time.Hour)
		if err != nil || !r.Acquired {
			t.Fatalf("Claim = %+v, %v", r, err)
		}
		return r.Token
	}
	complete := func(t *testing.T, k idempotency.Key, fp, body string) {
		if err := s.Complete(ctx, k, claim(t, k, fp), idempotency.Response{Status: 201, Body: []byte(body)}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	return []scenario.KeyState{
		{Name: "absent", Setup: func(*testing.T, idempotency.Key) {}, Want: scenario.Answer{Acquired: true}},
		{Name: "in progress", Setup: func(t *testing.T, k idempotency.Key) { claim(t, k, "fp") },
			Want: scenario.Answer{State: idempotency.StateInProgress, Fingerprint: "fp"}},
		{Name: "released", Setup: func(t *testing.T, k idempotency.Key) {
			if err := s.Release(ctx, k, claim(t, k, "fp")); err != nil {
				t.Fatal(err)
			}
		}, Want: scenario.Answer{Acquired: true}},
		{Name: "completed", Setup: func(t *testing.T, k idempotency.Key) { complete(t, k, "fp", "done") },
			Want: scenario.Answer{State: idempotency.StateCompleted, Fingerprint: "fp", Body: "done"}},
		{Name: "completed, other fingerprint", Setup: func(t *testing.T, k idempotency.Key) { complete(t, k, "fp-other", "other") },
			Want: scenario.Answer{State: idempotency.StateCompleted, Fingerprint: "fp-other", Body: "other"}},
	}
}

// TestScenariosCatchBrokenStores runs the scenarios on memstores that
// break one rule each, in a child process per store (all at once: they
// mostly wait), and checks that every scenario that claims to catch that
// kind of bug fails: the scenarios can tell a store that executes twice,
// loses an answer or lets a superseded holder write from a right one. The
// plain memstore passes them all.
func TestScenariosCatchBrokenStores(t *testing.T) {
	all := []string{"ExactlyOnce", "ExactlyOnceWaitForResult", "Ledger", "Crash", "KeyReused", "WatchAcrossInstances", "FastPathAnswers"}
	cases := []struct {
		store     string
		scenarios []string // scenarios that must fail
	}{
		{"none", nil},
		{"stealingClaims", []string{"ExactlyOnce", "Ledger", "Crash", "FastPathAnswers"}},
		{"staleWrites", []string{"Crash"}},
		{"deafWatcher", []string{"WatchAcrossInstances"}},
		{"renewsNothing", []string{"Crash"}},
		{"shortLeases", []string{"Crash"}},
		{"releasesAnyToken", []string{"Crash"}},
		{"losesAnswers", []string{"ExactlyOnce", "Ledger", "Crash", "KeyReused"}},
		{"keepsNoBody", []string{"ExactlyOnce", "Ledger", "Crash", "KeyReused"}},
		{"ignoresFingerprints", []string{"KeyReused", "FastPathAnswers"}},
		{"echoesFingerprintInProgress", []string{"KeyReused"}},
		{"echoesFingerprintCompleted", []string{"KeyReused", "FastPathAnswers"}},
		{"completedAsAbsent", []string{"ExactlyOnce", "Ledger", "KeyReused", "FastPathAnswers"}},
		{"staleReads", []string{"ExactlyOnce", "Ledger", "Crash", "KeyReused"}},
		{"reusesTokens", []string{"Crash"}},
	}
	wait := make([]func(testing.TB) (string, bool), len(cases))
	for i, tc := range cases {
		run := tc.scenarios
		if tc.store == "none" {
			run = all
		}
		wait[i] = testkit.StartChildTest("^TestScenarioMutantChild$/^("+strings.Join(run, "|")+")$",
			envScenarioMutant, tc.store, 60*time.Second)
	}
	for i, tc := range cases {
		t.Run(tc.store, func(t *testing.T) {
			out, ok := wait[i](t)
			if tc.store == "none" {
				if !ok {
					t.Fatalf("the scenarios failed the plain memstore:\n%s", out)
				}
				return
			}
			for _, sc := range tc.scenarios {
				if !strings.Contains(out, "--- FAIL: TestScenarioMutantChild/"+sc+" ") {
					t.Errorf("scenario %s did not fail on %s:\n%s", sc, tc.store, out)
				}
			}
		})
	}
}

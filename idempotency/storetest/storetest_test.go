package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/storetest"
)

// envBroken names the broken store TestBrokenStoreChild runs the suite on;
// unset, that test skips.
const envBroken = "SAFERETRY_STORETEST_BROKEN"

// Broken stores, each a memstore with one rule of the contract taken out.

// staleWrites lets any token complete: it completes with the entry's
// current token instead of the caller's.
type staleWrites struct{ idempotency.Store }

func (s staleWrites) Complete(ctx context.Context, k idempotency.Key, _ int64, resp idempotency.Response, ttl time.Duration) error {
	e, found, err := s.Get(ctx, k)
	if err != nil || !found {
		return err
	}
	return s.Store.Complete(ctx, k, e.Token, resp, ttl)
}

// stealingClaims takes over a claim in progress even while its lease lives.
type stealingClaims struct{ idempotency.Store }

func (s stealingClaims) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, k, fp, lease, ttl)
	if err == nil && !res.Acquired && res.Entry.State == idempotency.StateInProgress && res.Entry.Fingerprint == fp {
		if err := s.Release(ctx, k, res.Entry.Token); err != nil {
			return res, err
		}
		return s.Store.Claim(ctx, k, fp, lease, ttl)
	}
	return res, err
}

// neverExpires keeps entries a thousand times longer than asked.
type neverExpires struct{ idempotency.Store }

func (s neverExpires) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	return s.Store.Claim(ctx, k, fp, lease, 1000*ttl)
}

func (s neverExpires) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	return s.Store.Complete(ctx, k, token, resp, 1000*ttl)
}

// deafToContext ignores its callers' contexts.
type deafToContext struct{ idempotency.Store }

func (s deafToContext) Claim(_ context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	return s.Store.Claim(context.Background(), k, fp, lease, ttl)
}

func (s deafToContext) Get(_ context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	return s.Store.Get(context.Background(), k)
}

// deafWatcher is a Watcher whose channels are never closed.
type deafWatcher struct{ idempotency.Store }

func (deafWatcher) Watch(context.Context, idempotency.Key) (<-chan struct{}, func(), error) {
	return make(chan struct{}), func() {}, nil
}

// hidesWatcher wraps a memstore, which watches, without its Watch: it is
// declared Watching all the same.
type hidesWatcher struct{ idempotency.Store }

var broken = map[string]func(idempotency.Store) idempotency.Store{
	"deafWatcher":    func(s idempotency.Store) idempotency.Store { return deafWatcher{s} },
	"hidesWatcher":   func(s idempotency.Store) idempotency.Store { return hidesWatcher{s} },
	"staleWrites":    func(s idempotency.Store) idempotency.Store { return staleWrites{s} },
	"stealingClaims": func(s idempotency.Store) idempotency.Store { return stealingClaims{s} },
	"neverExpires":   func(s idempotency.Store) idempotency.Store { return neverExpires{s} },
	"deafToContext":  func(s idempotency.Store) idempotency.Store { return deafToContext{s} },
}

// TestBrokenStoreChild runs the suite on the broken store named by
// envBroken. It is run only as a child process of TestSuiteCatchesBrokenStores,
// which expects it to fail.
func TestBrokenStoreChild(t *testing.T) {
	wrap, ok := broken[os.Getenv(envBroken)]
	if !ok {
		t.Skip("run by TestSuiteCatchesBrokenStores only")
	}
	var declared []storetest.Feature
	if os.Getenv(envBroken) == "hidesWatcher" {
		declared = append(declared, storetest.Watching)
	}
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return wrap(s)
	}, declared...)
}

// TestSuiteCatchesBrokenStores runs the named conformance cases on stores
// that break one rule of the contract each, in a child process, and checks
// that every one of those cases fails: the suite can tell a wrong store
// from a right one. (memstore, redisstore and pgstore run the whole suite
// and pass it.)
func TestSuiteCatchesBrokenStores(t *testing.T) {
	for _, tc := range []struct {
		store string
		cases []string // conformance cases that must fail
	}{
		{"staleWrites", []string{"StaleTokenRefused", "LateCompleteRacesTakeover"}},
		{"stealingClaims", []string{"InProgressLiveLease", "ConcurrentClaimsOneWinner"}},
		{"neverExpires", []string{"TTLExpiryCompleted"}}, // waits out the suite's patience (10s)
		{"deafToContext", []string{"ContextCancelled"}},
		{"deafWatcher", []string{"WatchWakesOnComplete", "WatchWakesOnRelease"}}, // waits out the suite's patience
		{"hidesWatcher", []string{"GetNotFound"}},                                // any case: the declaration fails the run
	} {
		t.Run(tc.store, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0],
				"-test.run=^TestBrokenStoreChild$/^("+strings.Join(tc.cases, "|")+")$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), envBroken+"="+tc.store)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a store that breaks the contract:\n%s", out)
			}
			if tc.store == "hidesWatcher" {
				if !strings.Contains(string(out), "was declared watching but is not") {
					t.Errorf("a store declared Watching without Watch passed the declaration:\n%s", out)
				}
				return
			}
			for _, c := range tc.cases {
				if !strings.Contains(string(out), "--- FAIL: TestBrokenStoreChild/"+c+" ") {
					t.Errorf("case %s did not fail on %s:\n%s", c, tc.store, out)
				}
			}
		})
	}
}

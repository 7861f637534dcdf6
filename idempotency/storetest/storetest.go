// Package storetest is the conformance suite for idempotency.Store
// implementations. A store package calls Run from one test:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) idempotency.Store { return newTestStore(t) })
//	}
//
// The suite checks only what the idempotency.Store documentation promises. It
// runs on real time with short leases and ttls (tens to hundreds of
// milliseconds) and polls with deadlines rather than sleeping, because shared
// stores take time from their server's clock and cannot be given a fake one.
// The whole suite takes a few seconds.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

const (
	// longLease is a lease that cannot lapse during a test.
	longLease = 30 * time.Second
	// longTTL is a ttl that cannot expire during a test.
	longTTL = time.Hour
	// shortLease lapses quickly enough for takeover tests.
	shortLease = 150 * time.Millisecond
	// shortTTL expires quickly enough for expiry tests; Redis PEXPIRE and
	// database intervals both resolve it.
	shortTTL = 300 * time.Millisecond
	// patience bounds every poll for a lapse or an expiry.
	patience = 10 * time.Second
	// pollEvery is the pause between two polls.
	pollEvery = 10 * time.Millisecond
)

// Run checks that the stores built by newStore behave as the
// idempotency.Store contract says, and the contracts of the optional
// features they have (see Feature). Every subtest calls newStore with its
// own *testing.T and gets a fresh, empty store; newStore should register
// its own cleanup (closing the store, dropping test data) with t.Cleanup.
// Subtests run one after another. declared lists the features the stores
// must have: Run fails when one lacks it.
func Run(t *testing.T, newStore func(t *testing.T) idempotency.Store, declared ...Feature) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s idempotency.Store)
	}{
		{"ClaimNewKey", testClaimNewKey},
		{"ReplayCompleted", testReplayCompleted},
		{"ResponseCopied", testResponseCopied},
		{"FingerprintMismatch", testFingerprintMismatch},
		{"InProgressLiveLease", testInProgressLiveLease},
		{"ConcurrentClaimsOneWinner", testConcurrentClaims},
		{"LeaseLapseTakeover", testLeaseLapseTakeover},
		{"RenewAfterLapse", testRenewAfterLapse},
		{"CompleteAfterLapse", testCompleteAfterLapse},
		{"RenewExtendsLease", testRenewExtendsLease},
		{"StaleTokenRefused", testStaleTokenRefused},
		{"ReleaseThenReclaim", testReleaseThenReclaim},
		{"LateCompleteRacesTakeover", testLateCompleteRacesTakeover},
		{"TTLExpiryInProgress", testTTLExpiryInProgress},
		{"TTLExpiryCompleted", testTTLExpiryCompleted},
		{"CompleteRestartsTTL", testCompleteRestartsTTL},
		{"TakeoverRestartsTTL", testTakeoverRestartsTTL},
		{"CompleteCountsTTLFromNow", testCompleteCountsTTLFromNow},
		{"RenewOutlivesTTL", testRenewOutlivesTTL},
		{"NonPositiveDurationsRefused", testNonPositiveDurations},
		{"TinyLeaseHeldOrRefused", testTinyLeases},
		{"LongestTTLKept", testLongestTTL},
		{"ScopeSeparation", testScopeSeparation},
		{"ContextCancelled", testContextCancelled},
		{"GetNotFound", testGetNotFound},
		{"BytesKept", testBytesKept},
	}
	probe := newStore(t)
	if probe == nil {
		t.Fatal("storetest: newStore returned nil")
	}
	for _, f := range declared {
		if !has(probe, f) {
			t.Errorf("storetest: the store (%T) was declared %s but is not", probe, f)
		}
	}
	for _, f := range []Feature{Transactional, Watching} {
		if has(probe, f) {
			tests = append(tests, featureCases[f]...)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if s == nil {
				t.Fatal("storetest: newStore returned nil")
			}
			tc.fn(t, s)
		})
	}
}

// sample is a response that exercises what a store must keep byte for byte:
// repeated header values in order, binary and non-UTF-8 bytes.
func sample() idempotency.Response {
	body := make([]byte, 0, 4096)
	for i := range 4096 {
		body = append(body, byte(i*7))
	}
	return idempotency.Response{
		Status: http.StatusCreated,
		Header: http.Header{
			"Content-Type": {"application/json; charset=utf-8"},
			"Location":     {"/accounts/42/debits/7"},
			"X-Multi":      {"first", "second", "", "fourth"},
		},
		Body: body,
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// key returns a Key unique to the running test, so that a store that is less
// fresh than promised does not mix tests.
func key(t *testing.T, suffix string) idempotency.Key {
	return idempotency.Key{Scope: "tenant-" + t.Name(), Key: "key-" + suffix}
}

func mustClaim(t *testing.T, s idempotency.Store, k idempotency.Key, fp string, lease, ttl time.Duration) idempotency.ClaimResult {
	t.Helper()
	r, err := s.Claim(ctxT(t), k, fp, lease, ttl)
	if err != nil {
		t.Fatalf("Claim(%q, %q): %v", k.Key, fp, err)
	}
	return r
}

func mustAcquire(t *testing.T, s idempotency.Store, k idempotency.Key, fp string, lease, ttl time.Duration) int64 {
	t.Helper()
	r := mustClaim(t, s, k, fp, lease, ttl)
	if !r.Acquired {
		t.Fatalf("Claim(%q, %q) not acquired; blocked by %+v", k.Key, fp, r.Entry)
	}
	return r.Token
}

func mustGet(t *testing.T, s idempotency.Store, k idempotency.Key) (idempotency.Entry, bool) {
	t.Helper()
	e, found, err := s.Get(ctxT(t), k)
	if err != nil {
		t.Fatalf("Get(%q): %v", k.Key, err)
	}
	if !found && !isZero(e) {
		t.Errorf("Get(%q) found == false with a non-zero Entry %+v", k.Key, e)
	}
	return e, found
}

func isZero(e idempotency.Entry) bool {
	return e.State == 0 && e.Fingerprint == "" && e.Token == 0 && e.LeaseRemaining == 0 && e.Response == nil
}

func wantStale(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, idempotency.ErrStaleToken) {
		t.Errorf("%s = %v, want ErrStaleToken", op, err)
	}
}

// eventually polls cond until it holds or patience runs out.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("storetest: gave up after %v waiting until %s", patience, what)
		}
		pause(pollEvery)
	}
}

func pause(d time.Duration) {
	timer := time.NewTimer(d)
	<-timer.C
}

// diffResponse describes how got differs from want, or returns "". A nil and
// an empty Header or Body are the same, because not every store can tell
// them apart.
func diffResponse(got *idempotency.Response, want idempotency.Response) string {
	if got == nil {
		return "Response is nil"
	}
	var d []string
	if got.Status != want.Status {
		d = append(d, fmt.Sprintf("Status %d, want %d", got.Status, want.Status))
	}
	if got.Oversize != want.Oversize {
		d = append(d, fmt.Sprintf("Oversize %v, want %v", got.Oversize, want.Oversize))
	}
	if !bytes.Equal(got.Body, want.Body) {
		d = append(d, fmt.Sprintf("Body differs (%d bytes, want %d)", len(got.Body), len(want.Body)))
	}
	if len(got.Header) != len(want.Header) {
		d = append(d, fmt.Sprintf("Header %v, want %v", got.Header, want.Header))
	} else {
		for name, wv := range want.Header {
			gv, ok := got.Header[name]
			if !ok || len(gv) != len(wv) {
				d = append(d, fmt.Sprintf("Header[%q] = %q, want %q", name, gv, wv))
				continue
			}
			for i := range wv {
				if gv[i] != wv[i] {
					d = append(d, fmt.Sprintf("Header[%q] = %q, want %q", name, gv, wv))
					break
				}
			}
		}
	}
	return strings.Join(d, "; ")
}

package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

func testClaimNewKey(t *testing.T, s idempotency.Store) {
	k := key(t, "new")
	r := mustClaim(t, s, k, "fp-1", longLease, longTTL)
	if !r.Acquired || r.TookOver {
		t.Fatalf("Claim on a new key = %+v, want Acquired and not TookOver", r)
	}
	wantClaimLease(t, r, longLease)
	e, found := mustGet(t, s, k)
	if !found {
		t.Fatal("Get after Claim: not found")
	}
	if e.State != idempotency.StateInProgress || e.Fingerprint != "fp-1" || e.Token != r.Token || e.Response != nil {
		t.Errorf("Get after Claim = %+v, want in progress, fingerprint fp-1, token %d, no response", e, r.Token)
	}
	if e.LeaseRemaining <= 0 || e.LeaseRemaining > longLease {
		t.Errorf("LeaseRemaining = %v, want in (0, %v]", e.LeaseRemaining, longLease)
	}
}

func testReplayCompleted(t *testing.T, s idempotency.Store) {
	cases := []struct {
		name string
		resp idempotency.Response
	}{
		{"full", sample()},
		{"no header no body", idempotency.Response{Status: http.StatusNoContent}},
		{"empty body", idempotency.Response{Status: http.StatusOK, Header: http.Header{"Content-Length": {"0"}}, Body: []byte{}}},
		{"client error", idempotency.Response{Status: http.StatusUnprocessableEntity, Body: []byte(`{"title":"no"}`)}},
		{"oversize", idempotency.Response{Status: http.StatusOK, Oversize: true}},
		// A name without values is kept as a name: Content-Type set to
		// nil tells net/http not to sniff a type, on the replay too.
		{"name without values", idempotency.Response{Status: http.StatusCreated,
			Header: http.Header{"Content-Type": nil, "Location": {"/x/1"}}, Body: []byte("<html>opaque")}},
	}
	for i, c := range cases {
		k := key(t, "replay-"+strings.ReplaceAll(c.name, " ", "-"))
		fp := "fp-" + c.name
		tok := mustAcquire(t, s, k, fp, longLease, longTTL)
		if err := s.Complete(ctxT(t), k, tok, c.resp, longTTL); err != nil {
			t.Fatalf("%d %s: Complete: %v", i, c.name, err)
		}
		r := mustClaim(t, s, k, fp, longLease, longTTL)
		if r.Acquired {
			t.Errorf("%s: re-Claim of a completed key acquired it (token %d)", c.name, r.Token)
			continue
		}
		if r.Entry.State != idempotency.StateCompleted || r.Entry.Fingerprint != fp || r.Entry.Token != tok || r.Entry.LeaseRemaining != 0 {
			t.Errorf("%s: re-Claim entry = %+v, want completed, fingerprint %q, token %d, no lease", c.name, r.Entry, fp, tok)
		}
		if d := diffResponse(r.Entry.Response, c.resp); d != "" {
			t.Errorf("%s: re-Claim response: %s", c.name, d)
		}
		e, found := mustGet(t, s, k)
		if !found || e.State != idempotency.StateCompleted || e.Token != tok || e.Fingerprint != fp || e.LeaseRemaining != 0 {
			t.Errorf("%s: Get = %+v, %v; want completed with token %d", c.name, e, found, tok)
		}
		if d := diffResponse(e.Response, c.resp); d != "" {
			t.Errorf("%s: Get response: %s", c.name, d)
		}
	}
}

func testResponseCopied(t *testing.T, s idempotency.Store) {
	k := key(t, "copy")
	tok := mustAcquire(t, s, k, "fp", longLease, longTTL)
	resp := sample()
	if err := s.Complete(ctxT(t), k, tok, resp, longTTL); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if d := diffResponse(&resp, sample()); d != "" {
		t.Fatalf("Complete modified the caller's Response: %s", d)
	}
	// The caller's buffers are reused after Complete returns.
	resp.Body[0]++
	resp.Header["X-Multi"][0] = "changed"
	resp.Header.Set("X-Added", "1")
	e, _ := mustGet(t, s, k)
	if d := diffResponse(e.Response, sample()); d != "" {
		t.Fatalf("after the caller changed its Response: %s", d)
	}
	// A replayer may change what it was given, header values included.
	e.Response.Body[1]++
	e.Response.Header["X-Multi"][0] = "changed by the reader"
	e.Response.Header.Del("Location")
	e2, _ := mustGet(t, s, k)
	if d := diffResponse(e2.Response, sample()); d != "" {
		t.Errorf("after the reader changed its Entry: %s", d)
	}
}

func testFingerprintMismatch(t *testing.T, s idempotency.Store) {
	t.Run("in progress", func(t *testing.T) {
		k := key(t, "mismatch-progress")
		tok := mustAcquire(t, s, k, "fp-a", longLease, longTTL)
		r := mustClaim(t, s, k, "fp-b", longLease, longTTL)
		if r.Acquired {
			t.Fatal("Claim with another fingerprint acquired an entry in progress")
		}
		if r.Entry.State != idempotency.StateInProgress || r.Entry.Fingerprint != "fp-a" || r.Entry.Token != tok {
			t.Errorf("blocking entry = %+v, want in progress with fp-a, token %d", r.Entry, tok)
		}
	})
	t.Run("completed", func(t *testing.T) {
		k := key(t, "mismatch-done")
		tok := mustAcquire(t, s, k, "fp-a", longLease, longTTL)
		if err := s.Complete(ctxT(t), k, tok, sample(), longTTL); err != nil {
			t.Fatal(err)
		}
		r := mustClaim(t, s, k, "fp-b", longLease, longTTL)
		if r.Acquired {
			t.Fatal("Claim with another fingerprint acquired a completed entry")
		}
		if r.Entry.State != idempotency.StateCompleted || r.Entry.Fingerprint != "fp-a" || r.Entry.Token != tok {
			t.Errorf("blocking entry = %+v, want completed with fp-a, token %d", r.Entry, tok)
		}
		if d := diffResponse(r.Entry.Response, sample()); d != "" {
			t.Errorf("blocking entry response: %s", d)
		}
	})
	t.Run("lapsed lease never taken over", func(t *testing.T) {
		k := key(t, "mismatch-lapsed")
		tok := mustAcquire(t, s, k, "fp-a", shortLease, longTTL)
		waitLapsed(t, s, k)
		r := mustClaim(t, s, k, "fp-b", longLease, longTTL)
		if r.Acquired {
			t.Fatal("Claim with another fingerprint took over a lapsed lease")
		}
		if r.Entry.Fingerprint != "fp-a" || r.Entry.Token != tok || r.Entry.State != idempotency.StateInProgress {
			t.Errorf("blocking entry = %+v, want in progress with fp-a, token %d", r.Entry, tok)
		}
		// The rightful fingerprint still can.
		r = mustClaim(t, s, k, "fp-a", longLease, longTTL)
		if !r.Acquired || !r.TookOver || r.Token <= tok {
			t.Errorf("Claim with the same fingerprint = %+v, want a takeover with token > %d", r, tok)
		}
	})
}

// wantClaimLease checks the LeaseRemaining of r, a claim acquired with
// lease: zero (the store cannot tell) or about lease, since the claim was
// answered at once, and never more than the lease. The Middleware counts
// the lease from what the store says: a store that reports too little
// (a count of microseconds read as nanoseconds, say) never has a handler
// started.
func wantClaimLease(t *testing.T, r idempotency.ClaimResult, lease time.Duration) {
	t.Helper()
	if l := r.LeaseRemaining; l != 0 && (l <= lease/2 || l > lease) {
		t.Errorf("ClaimResult.LeaseRemaining = %v for a claim with lease %v answered at once, want about %v (or 0)", l, lease, lease)
	}
}

// waitLapsed polls Get until the lease of k's entry has lapsed by the store's
// clock.
func waitLapsed(t *testing.T, s idempotency.Store, k idempotency.Key) {
	t.Helper()
	eventually(t, "the lease lapses", func() bool {
		e, found := mustGet(t, s, k)
		if !found {
			t.Fatal("entry vanished while waiting for its lease to lapse")
		}
		return e.LeaseRemaining <= 0
	})
}

func testInProgressLiveLease(t *testing.T, s idempotency.Store) {
	k := key(t, "live")
	tok := mustAcquire(t, s, k, "fp", longLease, longTTL)
	r := mustClaim(t, s, k, "fp", longLease, longTTL)
	if r.Acquired {
		t.Fatalf("second Claim acquired a key in progress with a live lease (token %d)", r.Token)
	}
	e := r.Entry
	if e.State != idempotency.StateInProgress || e.Token != tok || e.Fingerprint != "fp" || e.Response != nil {
		t.Errorf("blocking entry = %+v, want in progress, token %d", e, tok)
	}
	if e.LeaseRemaining <= 0 || e.LeaseRemaining > longLease {
		t.Errorf("LeaseRemaining = %v, want in (0, %v]", e.LeaseRemaining, longLease)
	}
}

func testConcurrentClaims(t *testing.T, s idempotency.Store) {
	const n = 50
	k := key(t, "race")
	ctx := ctxT(t)
	results, errs := claimAtOnce(ctx, s, k, n, 0, nil)
	for _, err := range errs {
		t.Errorf("concurrent Claim: %v", err)
	}
	var winners []int64
	var blocked []idempotency.ClaimResult
	for _, r := range results {
		if r.Acquired {
			winners = append(winners, r.Token)
		} else {
			blocked = append(blocked, r)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d of %d concurrent Claims acquired the key, want exactly 1 (tokens %v)", len(winners), n, winners)
	}
	for _, r := range blocked {
		if r.Entry.State != idempotency.StateInProgress || r.Entry.Token != winners[0] {
			t.Errorf("loser saw %+v, want in progress with the winner's token %d", r.Entry, winners[0])
		}
	}
}

func testLeaseLapseTakeover(t *testing.T, s idempotency.Store) {
	k := key(t, "takeover")
	started := time.Now()
	old := mustAcquire(t, s, k, "fp", shortLease, longTTL)
	r := mustClaim(t, s, k, "fp", shortLease, longTTL)
	if time.Since(started) < shortLease/2 && r.Acquired {
		t.Fatalf("Claim right after the first acquired the key (token %d)", r.Token)
	}
	var took idempotency.ClaimResult
	eventually(t, "a Claim takes over the lapsed lease", func() bool {
		took = mustClaim(t, s, k, "fp", longLease, longTTL)
		return took.Acquired
	})
	if !took.TookOver {
		t.Errorf("takeover result = %+v, want TookOver", took)
	}
	wantClaimLease(t, took, longLease)
	if took.Token <= old {
		t.Errorf("takeover token %d, want greater than %d", took.Token, old)
	}
	ctx := ctxT(t)
	wantStale(t, "Renew with the superseded token", s.Renew(ctx, k, old, longLease))
	wantStale(t, "Complete with the superseded token", s.Complete(ctx, k, old, sample(), longTTL))
	wantStale(t, "Release with the superseded token", s.Release(ctx, k, old))
	e, found := mustGet(t, s, k)
	if !found || e.State != idempotency.StateInProgress || e.Token != took.Token || e.LeaseRemaining <= 0 {
		t.Fatalf("after stale writes Get = %+v, %v; want in progress with token %d and a live lease", e, found, took.Token)
	}
	if err := s.Complete(ctx, k, took.Token, sample(), longTTL); err != nil {
		t.Fatalf("Complete by the new holder: %v", err)
	}
	e, _ = mustGet(t, s, k)
	if d := diffResponse(e.Response, sample()); d != "" || e.State != idempotency.StateCompleted {
		t.Errorf("after the new holder completed: state %v, %s", e.State, d)
	}
}

func testRenewAfterLapse(t *testing.T, s idempotency.Store) {
	k := key(t, "renew-lapsed")
	tok := mustAcquire(t, s, k, "fp", shortLease, longTTL)
	waitLapsed(t, s, k)
	if err := s.Renew(ctxT(t), k, tok, longLease); err != nil {
		t.Fatalf("Renew of a lapsed lease nobody took over: %v", err)
	}
	r := mustClaim(t, s, k, "fp", longLease, longTTL)
	if r.Acquired {
		t.Fatal("Claim took over a renewed lease")
	}
	if r.Entry.Token != tok || r.Entry.LeaseRemaining <= shortLease {
		t.Errorf("entry after Renew = %+v, want token %d with more than %v left", r.Entry, tok, shortLease)
	}
}

// testCompleteAfterLapse checks that the holder of a claim whose lease
// lapsed, and that nobody took over, still completes or releases it: a lapsed
// lease only lets another claim take over, it does not end the claim.
func testCompleteAfterLapse(t *testing.T, s idempotency.Store) {
	t.Run("complete", func(t *testing.T) {
		k := key(t, "complete-lapsed")
		tok := mustAcquire(t, s, k, "fp", shortLease, longTTL)
		waitLapsed(t, s, k)
		if err := s.Complete(ctxT(t), k, tok, sample(), longTTL); err != nil {
			t.Fatalf("Complete of a lapsed lease nobody took over: %v", err)
		}
		e, found := mustGet(t, s, k)
		if !found || e.State != idempotency.StateCompleted || e.Token != tok {
			t.Fatalf("Get after Complete = %+v, %v; want completed with token %d", e, found, tok)
		}
		if d := diffResponse(e.Response, sample()); d != "" {
			t.Errorf("stored response: %s", d)
		}
	})
	t.Run("release", func(t *testing.T) {
		k := key(t, "release-lapsed")
		tok := mustAcquire(t, s, k, "fp", shortLease, longTTL)
		waitLapsed(t, s, k)
		if err := s.Release(ctxT(t), k, tok); err != nil {
			t.Fatalf("Release of a lapsed lease nobody took over: %v", err)
		}
		if e, found := mustGet(t, s, k); found {
			t.Fatalf("Get after Release = %+v, want not found", e)
		}
		r := mustClaim(t, s, k, "fp", longLease, longTTL)
		if !r.Acquired || r.TookOver || r.Token <= tok {
			t.Errorf("Claim after Release = %+v, want Acquired, not TookOver, token > %d", r, tok)
		}
	})
}

func testRenewExtendsLease(t *testing.T, s idempotency.Store) {
	k := key(t, "renew")
	tok := mustAcquire(t, s, k, "fp", shortLease, longTTL)
	if err := s.Renew(ctxT(t), k, tok, longLease); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	e, _ := mustGet(t, s, k)
	if e.LeaseRemaining <= longLease/2 || e.LeaseRemaining > longLease {
		t.Fatalf("LeaseRemaining after Renew = %v, want about %v", e.LeaseRemaining, longLease)
	}
	// Renew sets the lease to lease from now; it can also shorten it.
	if err := s.Renew(ctxT(t), k, tok, shortLease); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	e, _ = mustGet(t, s, k)
	if e.LeaseRemaining > shortLease {
		t.Errorf("LeaseRemaining after a shorter Renew = %v, want at most %v", e.LeaseRemaining, shortLease)
	}
	// It does not shorten the entry's ttl: the entry outlives the lease
	// (PEXPIRE with the lease would cut it).
	waitLapsed(t, s, k)
	pause(shortLease)
	if e, found := mustGet(t, s, k); !found || e.State != idempotency.StateInProgress || e.Token != tok {
		t.Errorf("Get after a shorter Renew lapsed = %+v, %v; want the entry kept for its ttl %v, in progress with token %d", e, found, longTTL, tok)
	}
}

func testStaleTokenRefused(t *testing.T, s idempotency.Store) {
	ctx := ctxT(t)
	t.Run("absent key", func(t *testing.T) {
		k := key(t, "absent")
		wantStale(t, "Renew", s.Renew(ctx, k, 1, longLease))
		wantStale(t, "Complete", s.Complete(ctx, k, 1, sample(), longTTL))
		wantStale(t, "Release", s.Release(ctx, k, 1))
		if _, found := mustGet(t, s, k); found {
			t.Error("stale writes on an absent key created an entry")
		}
	})
	t.Run("wrong token in progress", func(t *testing.T) {
		k := key(t, "wrong")
		tok := mustAcquire(t, s, k, "fp", longLease, longTTL)
		for _, bad := range []int64{tok + 1, tok - 1, 0, -tok} {
			// A short lease, which the holder's would become if the
			// stale Renew set it anyway.
			wantStale(t, "Renew", s.Renew(ctx, k, bad, shortLease))
			wantStale(t, "Complete", s.Complete(ctx, k, bad, sample(), longTTL))
			wantStale(t, "Release", s.Release(ctx, k, bad))
		}
		e, found := mustGet(t, s, k)
		if !found || e.State != idempotency.StateInProgress || e.Token != tok || e.Response != nil {
			t.Fatalf("after stale writes Get = %+v, %v; want unchanged, in progress with token %d", e, found, tok)
		}
		if e.LeaseRemaining <= longLease/2 {
			t.Errorf("LeaseRemaining after stale Renews = %v, want about %v as claimed", e.LeaseRemaining, longLease)
		}
		if err := s.Complete(ctx, k, tok, sample(), longTTL); err != nil {
			t.Errorf("Complete by the holder after stale writes: %v", err)
		}
	})
	t.Run("after completion", func(t *testing.T) {
		k := key(t, "done")
		tok := mustAcquire(t, s, k, "fp", longLease, longTTL)
		first := idempotency.Response{Status: http.StatusOK, Body: []byte("first")}
		if err := s.Complete(ctx, k, tok, first, longTTL); err != nil {
			t.Fatal(err)
		}
		wantStale(t, "second Complete", s.Complete(ctx, k, tok, sample(), longTTL))
		wantStale(t, "Renew after Complete", s.Renew(ctx, k, tok, longLease))
		wantStale(t, "Release after Complete", s.Release(ctx, k, tok))
		e, found := mustGet(t, s, k)
		if !found || e.State != idempotency.StateCompleted || e.Token != tok {
			t.Fatalf("after stale writes Get = %+v, %v; want the completed entry", e, found)
		}
		if d := diffResponse(e.Response, first); d != "" {
			t.Errorf("stored response changed: %s", d)
		}
	})
}

func testReleaseThenReclaim(t *testing.T, s idempotency.Store) {
	ctx := ctxT(t)
	k := key(t, "release")
	var tokens []int64
	tok := mustAcquire(t, s, k, "fp", longLease, longTTL)
	tokens = append(tokens, tok)
	for i := range 4 {
		if err := s.Release(ctx, k, tok); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
		if e, found := mustGet(t, s, k); found {
			t.Fatalf("Get after Release = %+v, want not found", e)
		}
		wantStale(t, "second Release", s.Release(ctx, k, tok))
		// Another fingerprint is fine: the key is free.
		fp := "fp"
		if i%2 == 1 {
			fp = "fp-other"
		}
		r := mustClaim(t, s, k, fp, longLease, longTTL)
		if !r.Acquired || r.TookOver {
			t.Fatalf("Claim after Release = %+v, want Acquired, not TookOver", r)
		}
		if r.Token <= tok {
			t.Fatalf("token after Release %d, want greater than %d", r.Token, tok)
		}
		old := tok
		tok = r.Token
		tokens = append(tokens, tok)
		wantStale(t, "Complete with the released token", s.Complete(ctx, k, old, sample(), longTTL))
		wantStale(t, "Renew with the released token", s.Renew(ctx, k, old, longLease))
		wantStale(t, "Release with the released token", s.Release(ctx, k, old))
	}
	e, found := mustGet(t, s, k)
	if !found || e.Token != tok || e.State != idempotency.StateInProgress {
		t.Fatalf("after stale writes Get = %+v, %v; want in progress with token %d", e, found, tok)
	}
	if err := s.Complete(ctx, k, tok, sample(), longTTL); err != nil {
		t.Fatalf("Complete by the last holder: %v", err)
	}
	t.Logf("tokens: %v", tokens)
}

// testLateCompleteRacesTakeover runs a dead holder's late Complete against
// takeover attempts: either the Complete wins and nobody takes over, or one
// takeover wins and the Complete is refused. Claims released all at once
// tend to run before the Complete, so in later rounds they are spread out,
// one every round × 50µs from round × 50µs after it starts: they then come
// while it is under way, where a store that checks the token, then writes
// without holding the entry between the two, lets them take over a claim
// it then completes. (With the first Claim let go together with the
// Complete, such a store, 5 ms between its check and its write, passed all
// eight rounds in 6 runs of 40 here; with every Claim after the Complete's
// start, in none of 60.)
func testLateCompleteRacesTakeover(t *testing.T, s idempotency.Store) {
	const rounds, claimers = 8, 8
	ctx := ctxT(t)
	for round := range rounds {
		k := key(t, "late-"+string(rune('a'+round)))
		old := mustAcquire(t, s, k, "fp", shortLease/3, longTTL)
		waitLapsed(t, s, k)
		var won bool
		var completeErr error
		stagger := time.Duration(round) * 50 * time.Microsecond
		claims, errs := claimAtOnce(ctx, s, k, claimers, stagger, func() {
			completeErr = s.Complete(ctx, k, old, sample(), longTTL)
			won = completeErr == nil
		})
		if completeErr != nil && !errors.Is(completeErr, idempotency.ErrStaleToken) {
			errs = append(errs, completeErr)
		}
		for _, err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		var takers int
		for _, r := range claims {
			if r.Acquired {
				takers++
			}
		}
		e, _ := mustGet(t, s, k)
		switch {
		case won && takers != 0:
			t.Errorf("round %d: the late Complete succeeded and %d Claims took over too", round, takers)
		case won && e.State != idempotency.StateCompleted:
			t.Errorf("round %d: the late Complete succeeded but Get = %+v", round, e)
		case !won && takers != 1:
			t.Errorf("round %d: the late Complete was refused and %d Claims took over, want 1", round, takers)
		case !won && (e.State != idempotency.StateInProgress || e.Token <= old):
			t.Errorf("round %d: after the takeover Get = %+v, want in progress with a token > %d", round, e, old)
		}
	}
}

func testTTLExpiryInProgress(t *testing.T, s idempotency.Store) {
	k := key(t, "ttl-progress")
	tok := mustAcquire(t, s, k, "fp-a", longLease, shortTTL)
	eventually(t, "the entry in progress expires", func() bool {
		_, found := mustGet(t, s, k)
		return !found
	})
	ctx := ctxT(t)
	wantStale(t, "Renew of an expired claim", s.Renew(ctx, k, tok, longLease))
	wantStale(t, "Complete of an expired claim", s.Complete(ctx, k, tok, sample(), longTTL))
	wantStale(t, "Release of an expired claim", s.Release(ctx, k, tok))
	// An expired entry is absent: even another fingerprint acquires it, and
	// that is not a takeover.
	r := mustClaim(t, s, k, "fp-b", longLease, longTTL)
	if !r.Acquired || r.TookOver {
		t.Fatalf("Claim after expiry = %+v, want Acquired and not TookOver", r)
	}
	// The expired claim's holder may still be running (paused past the
	// ttl): its token must not fence in the new claim's.
	if r.Token <= tok {
		t.Errorf("token after expiry %d, want greater than the expired claim's %d", r.Token, tok)
	}
	wantStale(t, "Release with the expired claim's token after a new claim", s.Release(ctx, k, tok))
	if e, found := mustGet(t, s, k); !found || e.Token != r.Token {
		t.Errorf("after a stale Release Get = %+v, %v; want the new claim with token %d", e, found, r.Token)
	}
}

func testTTLExpiryCompleted(t *testing.T, s idempotency.Store) {
	k := key(t, "ttl-done")
	tok := mustAcquire(t, s, k, "fp-a", longLease, longTTL)
	if err := s.Complete(ctxT(t), k, tok, sample(), shortTTL); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if e, found := mustGet(t, s, k); !found || e.State != idempotency.StateCompleted {
		t.Fatalf("Get right after Complete = %+v, %v", e, found)
	}
	eventually(t, "the completed entry expires", func() bool {
		_, found := mustGet(t, s, k)
		return !found
	})
	r := mustClaim(t, s, k, "fp-b", longLease, longTTL)
	if !r.Acquired || r.TookOver {
		t.Fatalf("Claim after expiry = %+v, want Acquired and not TookOver", r)
	}
	if r.Token <= tok {
		t.Errorf("token after expiry %d, want greater than the expired entry's %d", r.Token, tok)
	}
}

func testCompleteRestartsTTL(t *testing.T, s idempotency.Store) {
	// Complete must come before the claim's short ttl ends. On a loaded
	// machine it may not: such a round proves nothing (Complete is then
	// rightly refused), so it is tried again with a fresh key.
	for round := range 3 {
		k := key(t, fmt.Sprintf("ttl-restart-%d", round))
		claimed := time.Now()
		tok := mustAcquire(t, s, k, "fp", longLease, shortTTL)
		err := s.Complete(ctxT(t), k, tok, sample(), longTTL)
		if time.Since(claimed) >= shortTTL/2 {
			t.Logf("round %d: Claim and Complete took %v, too close to the %v ttl; again", round, time.Since(claimed), shortTTL)
			continue
		}
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		pause(shortTTL + shortTTL/2 - time.Since(claimed))
		e, found := mustGet(t, s, k)
		if !found || e.State != idempotency.StateCompleted {
			t.Errorf("entry completed with ttl %v expired with the claim's ttl %v: Get = %+v, %v", longTTL, shortTTL, e, found)
		}
		return
	}
	t.Skipf("Claim and Complete never took less than %v; cannot tell", shortTTL/2)
}

// testCompleteCountsTTLFromNow checks that Complete keeps the entry for ttl
// from when it completes, not from when the entry was claimed: a handler
// that ran longer than the ttl must still have its outcome replayed.
func testCompleteCountsTTLFromNow(t *testing.T, s idempotency.Store) {
	// A round whose Complete and Get take half the ttl proves nothing (the
	// entry may rightly be gone), and is tried again.
	for round := range 3 {
		k := key(t, fmt.Sprintf("ttl-from-now-%d", round))
		tok := mustAcquire(t, s, k, "fp", longLease, longTTL)
		pause(shortTTL)
		completing := time.Now()
		if err := s.Complete(ctxT(t), k, tok, sample(), shortTTL); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		e, found := mustGet(t, s, k)
		if time.Since(completing) >= shortTTL/2 {
			t.Logf("round %d: Complete and Get took %v, too close to the %v ttl; again", round, time.Since(completing), shortTTL)
			continue
		}
		if !found || e.State != idempotency.StateCompleted || e.Token != tok {
			t.Errorf("entry completed with ttl %v, %v after its claim: Get right after = %+v, %v; want it completed, kept for %v from the completion",
				shortTTL, shortTTL, e, found, shortTTL)
		}
		return
	}
	t.Skipf("Complete and Get never took less than %v; cannot tell", shortTTL/2)
}

// testTakeoverRestartsTTL checks that a takeover, which is a claim, keeps
// the entry for its own ttl from then on, not until the end of the ttl of
// the claim it took over: the new holder's outcome would be lost, and a
// duplicate would run beside it.
func testTakeoverRestartsTTL(t *testing.T, s idempotency.Store) {
	// As in testCompleteRestartsTTL, a round on a loaded machine that
	// takes over too late proves nothing, and is tried again.
	for round := range 3 {
		k := key(t, fmt.Sprintf("takeover-ttl-%d", round))
		claimed := time.Now()
		old := mustAcquire(t, s, k, "fp", shortLease/3, shortTTL)
		var took idempotency.ClaimResult
		eventually(t, "a Claim takes over the lapsed lease", func() bool {
			took = mustClaim(t, s, k, "fp", longLease, longTTL)
			return took.Acquired
		})
		if time.Since(claimed) >= shortTTL/2 {
			t.Logf("round %d: the takeover came %v after the claim, too close to its %v ttl; again", round, time.Since(claimed), shortTTL)
			continue
		}
		if !took.TookOver || took.Token <= old {
			t.Fatalf("takeover = %+v, want TookOver with a token > %d", took, old)
		}
		pause(shortTTL + shortTTL/2 - time.Since(claimed))
		e, found := mustGet(t, s, k)
		if !found || e.State != idempotency.StateInProgress || e.Token != took.Token {
			t.Errorf("entry taken over with ttl %v expired with the first claim's ttl %v: Get = %+v, %v", longTTL, shortTTL, e, found)
		}
		return
	}
	t.Skipf("the takeover never came within %v of the claim; cannot tell", shortTTL/2)
}

func testScopeSeparation(t *testing.T, s idempotency.Store) {
	ctx := ctxT(t)
	// Pairs that a careless encoding (joining with a separator) would merge.
	keys := []idempotency.Key{
		{Scope: "", Key: "k"},
		{Scope: "alice", Key: "k"},
		{Scope: "bob", Key: "k"},
		{Scope: "a:b", Key: "c"},
		{Scope: "a", Key: "b:c"},
		{Scope: "a|b", Key: "c"},
		{Scope: "a", Key: "b|c"},
		{Scope: "a/b", Key: "c"},
		{Scope: "a", Key: "b/c"},
		{Scope: "ab", Key: "c"},
		{Scope: "a", Key: "bc"},
		{Scope: "tenant-é", Key: strings.Repeat("x", 255)},
	}
	// The same pairs for every other punctuation byte a key may hold, any
	// of which a store may join scope and key with.
	for c := byte(' '); c <= '~'; c++ {
		if ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || c == ':' || c == '|' || c == '/' {
			continue
		}
		sep := string(c)
		keys = append(keys, idempotency.Key{Scope: "a" + sep + "b", Key: "c"}, idempotency.Key{Scope: "a", Key: "b" + sep + "c"})
	}
	tokens := make([]int64, len(keys))
	for i, k := range keys {
		tokens[i] = mustAcquire(t, s, k, "fp", longLease, longTTL)
	}
	// Completing one must not touch the others.
	if err := s.Complete(ctx, keys[1], tokens[1], sample(), longTTL); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if err := s.Release(ctx, keys[3], tokens[3]); err != nil {
		t.Fatalf("Release: %v", err)
	}
	for i, k := range keys {
		e, found := mustGet(t, s, k)
		switch i {
		case 1:
			if !found || e.State != idempotency.StateCompleted {
				t.Errorf("%+v: Get = %+v, %v; want completed", k, e, found)
			}
		case 3:
			if found {
				t.Errorf("%+v: Get = %+v; want released", k, e)
			}
		default:
			if !found || e.State != idempotency.StateInProgress || e.Token != tokens[i] {
				t.Errorf("%+v: Get = %+v, %v; want in progress with token %d", k, e, found, tokens[i])
			}
		}
	}
}

func testContextCancelled(t *testing.T, s idempotency.Store) {
	live := ctxT(t)
	k := key(t, "ctx")
	tok := mustAcquire(t, s, k, "fp", longLease, longTTL)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()

	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelled, context.Canceled},
		{"deadline exceeded", expired, context.DeadlineExceeded},
	} {
		check := func(op string, err error) {
			t.Helper()
			if err == nil {
				t.Errorf("%s with a %s context succeeded", op, c.name)
				return
			}
			if errors.Is(err, idempotency.ErrStaleToken) {
				t.Errorf("%s with a %s context = %v; ErrStaleToken claims the holder lost the key", op, c.name, err)
			}
			if !errors.Is(err, c.want) {
				t.Errorf("%s with a %s context = %v, want an error matching %v", op, c.name, err, c.want)
			}
		}
		other := key(t, "ctx-other-"+strings.ReplaceAll(c.name, " ", "-"))
		_, err := s.Claim(c.ctx, other, "fp", longLease, longTTL)
		check("Claim", err)
		// A short lease, which the holder's would become if the
		// refused Renew set it anyway.
		check("Renew", s.Renew(c.ctx, k, tok, shortLease))
		check("Complete", s.Complete(c.ctx, k, tok, sample(), longTTL))
		check("Release", s.Release(c.ctx, k, tok))
		_, _, err = s.Get(c.ctx, k)
		check("Get", err)
		if e, found := mustGet(t, s, other); found {
			t.Errorf("Claim with a %s context failed but reserved the key: Get = %+v", c.name, e)
		}
	}
	// A refused call changes nothing: the holder still holds its claim,
	// with the lease it claimed.
	if e, found := mustGet(t, s, k); !found || e.Token != tok || e.LeaseRemaining <= longLease/2 {
		t.Errorf("after cancelled calls Get = %+v, %v; want the claim of token %d with about %v left", e, found, tok, longLease)
	}
	if err := s.Complete(live, k, tok, sample(), longTTL); err != nil {
		t.Errorf("Complete by the holder after cancelled calls: %v", err)
	}
}

func testGetNotFound(t *testing.T, s idempotency.Store) {
	k := key(t, "missing")
	e, found, err := s.Get(ctxT(t), k)
	if err != nil || found || !isZero(e) {
		t.Errorf("Get of an absent key = %+v, %v, %v; want zero Entry, false, nil", e, found, err)
	}
	tok := mustAcquire(t, s, k, "fp", longLease, longTTL)
	if err := s.Release(ctxT(t), k, tok); err != nil {
		t.Fatal(err)
	}
	e, found, err = s.Get(ctxT(t), k)
	if err != nil || found || !isZero(e) {
		t.Errorf("Get of a released key = %+v, %v, %v; want zero Entry, false, nil", e, found, err)
	}
}

// testRenewOutlivesTTL checks that a holder that keeps renewing keeps its
// entry past the ttl it claimed with: a handler slower than the ttl must not
// lose its key to a duplicate.
func testRenewOutlivesTTL(t *testing.T, s idempotency.Store) {
	k := key(t, "renew-ttl")
	tok := mustAcquire(t, s, k, "fp", shortTTL, shortTTL)
	if err := s.Renew(ctxT(t), k, tok, longLease); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	pause(2 * shortTTL)
	e, found := mustGet(t, s, k)
	if !found || e.State != idempotency.StateInProgress || e.Token != tok {
		t.Fatalf("Get after the ttl of a renewed claim = %+v, found %v; want in progress with token %d", e, found, tok)
	}
	if r := mustClaim(t, s, k, "fp", longLease, longTTL); r.Acquired {
		t.Errorf("Claim acquired a renewed claim after its ttl: %+v", r)
	}
	if err := s.Complete(ctxT(t), k, tok, sample(), longTTL); err != nil {
		t.Errorf("Complete of a renewed claim after its ttl: %v", err)
	}
}

// testNonPositiveDurations checks that a zero or negative lease or ttl is an
// error, not a claim that nobody else can see or that expires at once.
func testNonPositiveDurations(t *testing.T, s idempotency.Store) {
	ctx := ctxT(t)
	for _, c := range []struct {
		name       string
		lease, ttl time.Duration
	}{
		{"zero ttl", longLease, 0},
		{"negative ttl", longLease, -time.Second},
		{"zero lease", 0, longTTL},
		{"negative lease", -time.Second, longTTL},
	} {
		k := key(t, "durations-"+strings.ReplaceAll(c.name, " ", "-"))
		r, err := s.Claim(ctx, k, "fp", c.lease, c.ttl)
		if err == nil {
			t.Errorf("Claim with %s = %+v, want an error", c.name, r)
			continue
		}
		if _, found := mustGet(t, s, k); found {
			t.Errorf("Claim with %s failed but left an entry", c.name)
		}
	}
	k := key(t, "durations-held")
	tok := mustAcquire(t, s, k, "fp", longLease, longTTL)
	for _, d := range []time.Duration{0, -time.Second} {
		if err := s.Complete(ctx, k, tok, sample(), d); err == nil {
			t.Errorf("Complete with ttl %v succeeded, want an error", d)
		}
		if err := s.Renew(ctx, k, tok, d); err == nil {
			t.Errorf("Renew with lease %v succeeded, want an error", d)
		}
	}
	e, found := mustGet(t, s, k)
	if !found || e.State != idempotency.StateInProgress || e.Token != tok {
		t.Fatalf("after refused calls Get = %+v, found %v; want still in progress with token %d", e, found, tok)
	}
	if e.LeaseRemaining <= longLease/2 {
		t.Errorf("LeaseRemaining after refused Renews = %v, want about %v as claimed", e.LeaseRemaining, longLease)
	}
}

// testTinyLeases checks a lease above zero but below a microsecond, the
// unit of the shared stores' clocks. A store may refuse it, as it refuses a
// lease of zero: with an error other than ErrStaleToken, leaving nothing,
// and Renew refuses it likewise. Or it may keep it (a store that counts
// nanoseconds): the claim is then acquired with the lease it asked for, as
// any claim answered at once, and Renew accepts it too. What it must not do
// is round the lease down to zero and hand out a claim lapsed at birth.
func testTinyLeases(t *testing.T, s idempotency.Store) {
	ctx := ctxT(t)
	for _, lease := range []time.Duration{time.Nanosecond, time.Microsecond - time.Nanosecond} {
		k := key(t, fmt.Sprint("tiny-", int64(lease)))
		r, claimErr := s.Claim(ctx, k, "fp", lease, longTTL)
		switch {
		case errors.Is(claimErr, idempotency.ErrStaleToken):
			t.Errorf("Claim with lease %v = %v, want a claim or another error", lease, claimErr)
		case claimErr != nil:
			if _, found := mustGet(t, s, k); found {
				t.Errorf("Claim with lease %v failed (%v) but left an entry", lease, claimErr)
			}
		case !r.Acquired:
			t.Errorf("Claim of a new key with lease %v = %+v, want acquired or an error", lease, r)
		case r.LeaseRemaining < 0:
			t.Errorf("Claim with lease %v acquired a claim lapsed at birth: LeaseRemaining %v", lease, r.LeaseRemaining)
		default:
			wantClaimLease(t, r, lease)
		}

		held := key(t, fmt.Sprint("tiny-held-", int64(lease)))
		tok := mustAcquire(t, s, held, "fp", longLease, longTTL)
		renewErr := s.Renew(ctx, held, tok, lease)
		switch {
		case errors.Is(renewErr, idempotency.ErrStaleToken):
			t.Errorf("Renew of a held claim with lease %v = %v, want nil or another error", lease, renewErr)
		case (claimErr == nil) != (renewErr == nil):
			t.Errorf("Claim with lease %v = %v but Renew = %v: a store refuses the same leases in both", lease, claimErr, renewErr)
		}
		if renewErr != nil {
			if e, found := mustGet(t, s, held); !found || e.Token != tok || e.LeaseRemaining <= longLease/2 {
				t.Errorf("after a refused Renew with lease %v Get = %+v, found %v; want the claim's lease as it was", lease, e, found)
			}
		}
	}
}

// testBytesKept checks that every byte a request or response can carry is
// kept: scopes and fingerprints with NUL, invalid UTF-8, 0xFF and
// separators, keys with the punctuation ParseKey allows, and header names
// and values and bodies of any octets, replayed byte for byte by Get and
// by a refused Claim, and left as they were in the caller's Response.
// Keys that differ only where separators fall must not share an entry.
func testBytesKept(t *testing.T, s idempotency.Store) {
	resp := bytesResponse()
	scopes := []string{"", "a\x00b", "\xff", "\xc3\x28", "tenant:{x}", "\x01lead", "ünïcode ✓", "s:1", "s"}
	keys := []string{"k", "k:{}", `k"q`, "k,1", "k;p=1", "1:k", "x y"}
	fp := "fp\x00\xff\xc3\x28:{}" + string(resp.Body) // every byte value
	type claimed struct {
		k   idempotency.Key
		tok int64
	}
	var all []claimed
	for _, scope := range scopes {
		for _, key := range keys {
			k := idempotency.Key{Scope: "bytes-" + t.Name() + scope, Key: key}
			r := mustClaim(t, s, k, fp, longLease, longTTL)
			if !r.Acquired {
				t.Fatalf("Claim(%q, %q) not acquired: a different key's entry stands in the way: %+v", k.Scope, k.Key, r.Entry)
			}
			all = append(all, claimed{k, r.Token})
		}
	}
	for _, c := range all {
		if err := s.Complete(ctxT(t), c.k, c.tok, resp, longTTL); err != nil {
			t.Fatalf("Complete(%q, %q): %v", c.k.Scope, c.k.Key, err)
		}
	}
	// Complete must not modify resp; what the store gives back is compared
	// with a fresh copy, not with what the store may have changed.
	if d := diffResponse(&resp, bytesResponse()); d != "" {
		t.Errorf("Complete modified the caller's Response: %s", d)
	}
	resp = bytesResponse()
	for _, c := range all {
		e, found := mustGet(t, s, c.k)
		if !found || e.State != idempotency.StateCompleted || e.Token != c.tok || e.Fingerprint != fp {
			t.Fatalf("Get(%q, %q) = %+v, %v; want completed with token %d and fingerprint %q", c.k.Scope, c.k.Key, e, found, c.tok, fp)
		}
		if d := diffResponse(e.Response, resp); d != "" {
			t.Errorf("Get(%q, %q) response: %s", c.k.Scope, c.k.Key, d)
		}
		r := mustClaim(t, s, c.k, fp, longLease, longTTL)
		if r.Acquired || r.Entry.Fingerprint != fp {
			t.Fatalf("re-Claim(%q, %q) = %+v; want the completed entry", c.k.Scope, c.k.Key, r)
		}
		if d := diffResponse(r.Entry.Response, resp); d != "" {
			t.Errorf("re-Claim(%q, %q) response: %s", c.k.Scope, c.k.Key, d)
		}
	}
}

// bytesResponse is the response of testBytesKept, made anew at each call:
// header names and values with NUL, invalid UTF-8, 0xFF, CR LF and
// separators, values made of every byte value (a store that joins values
// with any one byte splits them wrongly), and a body of every byte value.
func bytesResponse() idempotency.Response {
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	return idempotency.Response{
		Status: http.StatusCreated,
		Header: http.Header{
			"Location":     {"/p/\x00/q"},
			"Etag":         {"\"\xff\xfe\"", "\xc3\x28 invalid utf-8"},
			"Link":         {"<a>; rel=\"x\", <b>", "k:{v}", "\r\n", ""},
			"X-\x00Odd":    {"\x01\x7f\x80"},
			"X-Every-Byte": {string(every), "", string(every)},
			string(every):  {"a name of every byte"},
			"Content-Type": {"application/octet-stream"},
		},
		Body: every,
	}
}

// claimAtOnce makes n Claims of k for "fp" at once, from goroutines of
// their own released together, alongside along (when not nil) in one more,
// and returns what they got once all are done. With a stagger above zero,
// the i-th Claim (from 0) waits (i+1) × stagger after the release, so that
// along starts first and the Claims come while it is under way.
func claimAtOnce(ctx context.Context, s idempotency.Store, k idempotency.Key, n int, stagger time.Duration, along func()) ([]idempotency.ClaimResult, []error) {
	var mu sync.Mutex
	var results []idempotency.ClaimResult
	var errs []error
	start := make(chan struct{})
	var wg sync.WaitGroup
	if along != nil {
		wg.Go(func() { <-start; along() })
	}
	for i := range n {
		wg.Go(func() {
			<-start
			if stagger > 0 {
				pause(time.Duration(i+1) * stagger)
			}
			r, err := s.Claim(ctx, k, "fp", longLease, longTTL)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			results = append(results, r)
		})
	}
	close(start)
	wg.Wait()
	return results, errs
}

// testLongestTTL gives the longest ttl there is, as WithTTL(math.MaxInt64)
// does to mean "for ever": the entry must be kept, not wrap to an expired
// one (a duplicate would acquire the key beside the holder, and the
// outcome would never be stored).
func testLongestTTL(t *testing.T, s idempotency.Store) {
	const forever = time.Duration(math.MaxInt64)
	k := key(t, "forever")
	tok := mustAcquire(t, s, k, "fp", longLease, forever)
	if r := mustClaim(t, s, k, "fp", longLease, forever); r.Acquired {
		t.Fatalf("a second Claim under the longest ttl acquired the key (token %d) beside token %d", r.Token, tok)
	}
	if err := s.Complete(ctxT(t), k, tok, sample(), forever); err != nil {
		t.Fatalf("Complete under the longest ttl: %v", err)
	}
	r := mustClaim(t, s, k, "fp", longLease, forever)
	if r.Acquired || r.Entry.State != idempotency.StateCompleted || r.Entry.Token != tok {
		t.Fatalf("Claim after Complete under the longest ttl = %+v, want the completed entry of token %d", r, tok)
	}
}

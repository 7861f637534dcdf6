package conformance_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

// TestBrokenServers: each flaw of a hand-written idempotency layer fails
// exactly the checks it breaks, and a layer without flaws passes them all.
func TestBrokenServers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flaws    flaws
		failed   []string
		checkTTL bool // check ttl-expiry (it waits for the TTL)
	}{
		{"no flaw", flaws{}, nil, true},
		{"check then insert", flaws{raceWindow: 3 * work}, []string{conformance.CheckConcurrentOnce, conformance.CheckCountOnce}, false},
		{"no fingerprint", flaws{noFingerprint: true}, []string{conformance.CheckReuseRefused, conformance.CheckReuseStatus}, false},
		{"fingerprint of the length only", flaws{lengthOnly: true}, []string{conformance.CheckReuseRefused}, false},
		{"replay re-rendered", flaws{rerenderReplay: true}, []string{conformance.CheckReplay}, false},
		{"500 in progress", flaws{inProgressStatus: http.StatusInternalServerError}, []string{conformance.CheckConcurrent409}, false},
		{"200 in progress", flaws{inProgressStatus: http.StatusOK}, []string{conformance.CheckConcurrentOnce, conformance.CheckConcurrent409}, false},
		{"409 without Retry-After", flaws{noRetryAfter: true}, []string{conformance.CheckConflictRetryAfter}, false},
		{"keys never expire", flaws{neverExpire: true}, []string{conformance.CheckTTLExpiry}, true},
		{"errors as text/plain", flaws{textErrors: true}, []string{conformance.CheckProblemJSON}, false},
		{"one scope for all", flaws{sharedScope: true}, []string{conformance.CheckScopeIsolation}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			retention, c := longRetention, fullChecker("")
			var skipped []string
			if tc.checkTTL {
				retention = ttl
			} else {
				c.TTL = 0
				skipped = append(skipped, conformance.CheckTTLExpiry)
			}
			if tc.flaws.inProgressStatus != 0 || tc.flaws.raceWindow > 0 {
				skipped = append(skipped, conformance.CheckConflictRetryAfter) // no 409 comes
			}
			srv := newNaive(tc.flaws, retention)
			defer srv.Close()
			c.CountURL = srv.URL + "/items"
			rep := check(t, c, srv.URL+"/items")
			wantOutcome(t, rep, tc.failed, skipped)
		})
	}
}

// TestKeysPerInstance: two instances, each keeping its keys in its own
// memory over one shared database, behind a load balancer that sends POSTs
// to them in turn. The replay lands on the other instance and runs again,
// and so does the burst: replay, replay-headers (another Location),
// count-once and concurrent-once fail.
func TestKeysPerInstance(t *testing.T) {
	items := &naive{entries: map[string]*naiveEntry{}} // the shared database: only its handler is used
	var instances []*httptest.Server
	for range 2 {
		st := memstore.New()
		t.Cleanup(func() { _ = st.Close() })
		mw := idempotency.Middleware(st, idempotency.WithKeyRequired(true))
		handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			items.execute(w, &naiveEntry{}, readAll(r))
		})
		mux := http.NewServeMux()
		mux.Handle("POST /items", mw(handler))
		mux.Handle("GET /items", items)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		instances = append(instances, srv)
	}
	var next atomic.Int64
	lb := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		i := 0
		if pr.In.Method == http.MethodPost {
			i = int(next.Add(1) % int64(len(instances)))
		}
		u, _ := url.Parse(instances[i].URL)
		pr.SetURL(u)
	}})
	defer lb.Close()

	c := fullChecker(lb.URL + "/items")
	c.TTL, c.AuthA, c.AuthB = 0, nil, nil
	rep := check(t, c, lb.URL+"/items")
	wantOutcome(t, rep, []string{conformance.CheckReplay, conformance.CheckReplayHeaders, conformance.CheckCountOnce, conformance.CheckConcurrentOnce},
		[]string{conformance.CheckTTLExpiry, conformance.CheckScopeIsolation})
}

// TestProfiles: a reused key answered 400, as Stripe does, passes under
// ProfileStripe and fails reuse-status under ProfileIETF; text/plain
// errors fail problem-json under ietf and only warn under stripe, where it
// is INFO.
func TestProfiles(t *testing.T) {
	srv := newNaive(flaws{reuseStatus: http.StatusBadRequest, textErrors: true}, longRetention)
	defer srv.Close()
	for _, tc := range []struct {
		profile conformance.Profile
		failed  []string
	}{
		{conformance.ProfileIETF, []string{conformance.CheckReuseStatus, conformance.CheckProblemJSON}},
		{conformance.ProfileStripe, nil},
	} {
		t.Run(string(tc.profile), func(t *testing.T) {
			c := fullChecker(srv.URL + "/items")
			c.TTL, c.Profile = 0, tc.profile
			rep := check(t, c, srv.URL+"/items")
			wantOutcome(t, rep, tc.failed, []string{conformance.CheckTTLExpiry})
			if res, _ := rep.Result(conformance.CheckProblemJSON); tc.profile == conformance.ProfileStripe &&
				(res.Level != conformance.LevelInfo || res.Status != conformance.Warn) {
				t.Errorf("stripe problem-json: %s %s, want INFO WARN", res.Level, res.Status)
			}
		})
	}
}

package conformance_test

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Redis, testenv.Postgres) }

// body is the operation every test server takes.
const body = `{"amount":1250,"currency":"EUR","recipient":"alice"}`

// work is how long a test server's handler works, so that the burst finds
// the first request in progress and 409s (and their Retry-After) show. At
// 40 ms a loaded machine (the race detector, the other packages' tests on
// the same database) sometimes had the first request done before the
// burst's other connections were even accepted.
const work = 150 * time.Millisecond

// ttl is the retention of the test servers whose ttl-expiry is checked,
// and what the checker is told. The burst must be answered within it, or
// its key expires while it runs and executes again; it is long enough for
// a loaded machine under the race detector. Servers whose ttl-expiry is not
// checked keep keys for longRetention.
const (
	ttl           = 3 * time.Second
	longRetention = time.Hour
)

// principals are the headers of the two principals of scope-isolation.
var (
	principalA = http.Header{"Authorization": {"Bearer alice"}}
	principalB = http.Header{"Authorization": {"Bearer bob"}}
)

// fullChecker runs every check: count, principals and retention included.
func fullChecker(countURL string) *conformance.Checker {
	return &conformance.Checker{CountURL: countURL, TTL: ttl, AuthA: principalA, AuthB: principalB, Timeout: 10 * time.Second}
}

// check runs c against url, the test servers' operation, and fails t on
// an error.
func check(t *testing.T, c *conformance.Checker, url string) conformance.Report {
	t.Helper()
	return runTarget(t, c, conformance.Target{URL: url, Body: []byte(body), KeyRequired: true})
}

// runTarget runs c against target and fails t on an error.
func runTarget(t *testing.T, c *conformance.Checker, target conformance.Target) conformance.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := c.Run(ctx, target)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

// wantOutcome asserts that exactly the checks failed lists FAIL in rep,
// that those in skipped are SKIP, and that every other MUST and SHOULD
// check passed; it logs the report when not.
func wantOutcome(t *testing.T, rep conformance.Report, failed, skipped []string) {
	t.Helper()
	got := rep.Failed()
	sort.Strings(got)
	want := slices.Clone(failed)
	sort.Strings(want)
	ok := slices.Equal(got, want)
	if !ok {
		t.Errorf("failed checks %q, want %q", got, want)
	}
	for _, res := range rep.Results {
		switch {
		case slices.Contains(failed, res.ID):
		case slices.Contains(skipped, res.ID):
			if res.Status != conformance.Skip {
				t.Errorf("%s: %s (%s), want SKIP", res.ID, res.Status, res.Verdict)
				ok = false
			}
		case res.Level != conformance.LevelInfo && res.Status != conformance.Pass:
			t.Errorf("%s (%s): %s (%s), want PASS", res.ID, res.Level, res.Status, res.Verdict)
			ok = false
		}
	}
	if wantPassed := !mustIn(rep, failed); rep.Passed() != wantPassed {
		t.Errorf("Passed() = %v, want %v", rep.Passed(), wantPassed)
	}
	if !ok || t.Failed() {
		logText(t, rep)
	}
}

// logText logs rep as WriteText writes it.
func logText(t *testing.T, rep conformance.Report) {
	t.Helper()
	var b strings.Builder
	_ = conformance.WriteText(&b, []conformance.Report{rep})
	t.Logf("report:\n%s", b.String())
}

// mustIn reports whether one of ids is a MUST check in rep.
func mustIn(rep conformance.Report, ids []string) bool {
	for _, id := range ids {
		if res, ok := rep.Result(id); ok && res.Level == conformance.LevelMust {
			return true
		}
	}
	return false
}

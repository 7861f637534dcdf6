package conformance_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/internal/contract"
)

// foldKeyCase plants a key store that compares keys in any case, as a
// UNIQUE column under a case-insensitive collation (MySQL's default) does:
// the key reaches the Middleware in lower case. Two operations whose keys
// differ only in case then run once, the second answered with the first's
// replay. unmarked drops the replay marker too.
func foldKeyCase(unmarked bool) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if vs := r.Header.Values(contract.HeaderKey); len(vs) == 1 {
				r.Header.Set(contract.HeaderKey, strings.ToLower(vs[0]))
			}
			if unmarked {
				w = dropReplayed{w}
			}
			h.ServeHTTP(w, r)
		})
	}
}

// dropReplayed removes Idempotent-Replayed from the answer it writes.
type dropReplayed struct{ http.ResponseWriter }

func (d dropReplayed) WriteHeader(code int) {
	d.Header().Del(contract.HeaderReplayed)
	d.ResponseWriter.WriteHeader(code)
}

func (d dropReplayed) Write(b []byte) (int, error) {
	d.Header().Del(contract.HeaderReplayed)
	return d.ResponseWriter.Write(b)
}

// TestKeyCaseFolded: a key is compared byte for byte (CONTRACT.md: the
// key names one logical operation). A server that folds its case runs
// the operation of the burst, whose key differs from the first request's
// only in case, not at all: it replays the first request's answer.
// concurrent-once fails when the server marks its replays (no success of
// the burst is an execution) and warns when it does not (the answers
// could also be new executions that name the same resource); the
// Middleware alone passes.
func TestKeyCaseFolded(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(http.Handler) http.Handler
		want conformance.Status
	}{
		{"the Middleware", func(h http.Handler) http.Handler { return h }, conformance.Pass},
		{"keys folded, replays marked", foldKeyCase(false), conformance.Fail},
		{"keys folded, replays unmarked", foldKeyCase(true), conformance.Warn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := plantedServer(t, tc.wrap)
			c := &conformance.Checker{Concurrency: 4, Timeout: 5 * time.Second}
			rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/items", Body: []byte(body)})
			res, _ := rep.Result(conformance.CheckConcurrentOnce)
			if res.Status != tc.want || (tc.want != conformance.Pass && !strings.Contains(res.Verdict, "case")) {
				logText(t, rep)
				t.Fatalf("concurrent-once %s (%s), want %s naming the keys' case", res.Status, res.Verdict, tc.want)
			}
		})
	}
}

package conformance_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
)

// TestKeyBoundToEndpoint: a key names one request, its method and path
// included (CONTRACT.md: the fingerprint covers method, path, query and
// body). A layer whose fingerprint leaves the path out answers the same
// key and body at another path with the first request's replay, so a
// client that uses one key for two endpoints (a payment and its refund,
// keyed by an order) gets the payment's answer for the refund, which never
// runs: reuse-refused fails. The Middleware alone refuses it (422) and
// passes.
func TestKeyBoundToEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(http.Handler) http.Handler
		want conformance.Status
	}{
		{"the Middleware", func(h http.Handler) http.Handler { return h }, conformance.Pass},
		{"the path left out of the fingerprint", func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.URL.Path, r.URL.RawPath, r.RequestURI = "/items", "", "/items"
				h.ServeHTTP(w, r)
			})
		}, conformance.Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := plantedServer(t, tc.wrap)
			c := &conformance.Checker{Concurrency: 2, Timeout: 5 * time.Second}
			rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/items", Body: []byte(body)})
			res, _ := rep.Result(conformance.CheckReuseRefused)
			if res.Status != tc.want || (tc.want == conformance.Fail && !strings.Contains(res.Verdict, "path")) {
				logText(t, rep)
				t.Fatalf("reuse-refused %s (%s), want %s", res.Status, res.Verdict, tc.want)
			}
		})
	}
}

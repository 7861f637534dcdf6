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

// TestOtherPathBelowURL: the other path is the URL's own path, as written
// (an escaped slash kept escaped), with one segment added and the query
// kept: a path below the endpoint, not one beside it that a router may
// send elsewhere.
func TestOtherPathBelowURL(t *testing.T) {
	for _, tc := range []struct{ url, prefix, suffix string }{
		{"http://api.example/v1/files/a%2Fb/copy?x=1", "http://api.example/v1/files/a%2Fb/copy/saferetry-check-path-", "?x=1"},
		{"http://api.example/v1/items/?x=%2F", "http://api.example/v1/items/saferetry-check-path-", "?x=%2F"},
		{"http://api.example", "http://api.example/saferetry-check-path-", ""},
	} {
		plan, err := new(conformance.Checker).Plan(conformance.Target{URL: tc.url, Body: []byte(body)})
		if err != nil {
			t.Fatalf("%s: Plan: %v", tc.url, err)
		}
		var got []string
		for _, p := range plan {
			if p.Check == conformance.CheckReuseRefused && p.Request.URL != tc.url {
				got = append(got, p.Request.URL)
			}
		}
		if len(got) != 1 || !strings.HasPrefix(got[0], tc.prefix) || !strings.HasSuffix(got[0], tc.suffix) {
			t.Errorf("URL %s: the other path's request goes to %q, want one URL %s<uuid>%s", tc.url, got, tc.prefix, tc.suffix)
		}
	}
}

// TestOtherPathReported: the request at another path is part of what
// reuse-refused rests on, so its verdict says what it got and its
// evidence holds it (the -json and -junit reports show it), as they do
// the other body's requests; before, a passing reuse-refused showed no
// trace of it.
func TestOtherPathReported(t *testing.T) {
	srv := plantedServer(t, func(h http.Handler) http.Handler { return h })
	c := &conformance.Checker{Concurrency: 2, Timeout: 5 * time.Second}
	rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/items", Body: []byte(body)})
	res, _ := rep.Result(conformance.CheckReuseRefused)
	var found bool
	for _, ex := range res.Evidence {
		found = found || strings.Contains(ex.URL, "/items/saferetry-check-path-") && ex.Status == http.StatusUnprocessableEntity
	}
	if res.Status != conformance.Pass || !found || !strings.Contains(res.Verdict, "another path, 422") {
		logText(t, rep)
		t.Fatalf("reuse-refused %s (%s), %d exchanges of evidence; want PASS, the other path's 422 in the verdict and in the evidence", res.Status, res.Verdict, len(res.Evidence))
	}
}

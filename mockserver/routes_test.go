package mockserver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// documentedRoutes are the routes of the package doc, with the methods each
// allows as its Allow header lists them (GET brings HEAD, as in ServeMux).
var documentedRoutes = []struct{ path, allow string }{
	{"/payments", "GET, HEAD, POST"},
	{"/payments/pay_1", "GET, HEAD"},
	{"/balance", "GET, HEAD"},
	{"/_mock/fail", "POST"},
	{"/_mock/drop-after-commit", "POST"},
	{"/_mock/delay", "POST"},
	{"/_mock/latency", "PUT"},
	{"/_mock/faults", "DELETE, GET, HEAD"},
	{"/_mock/expire-keys", "POST"},
	{"/_mock/reset", "POST"},
	{"/_mock/keys", "GET, HEAD"},
	{"/_mock/keys/some-key", "GET, HEAD"},
}

// TestWrongMethodIs405 checks every documented route: each method it does
// not allow is answered 405 with a problem and an Allow header listing the
// methods it does allow.
func TestWrongMethodIs405(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for _, rt := range documentedRoutes {
		allowed := strings.Split(rt.allow, ", ")
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
			if slices.Contains(allowed, method) {
				continue
			}
			resp, b := mustSend(t, srv, method, rt.path, "", "")
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405; body %s", method, rt.path, resp.StatusCode, b)
				continue
			}
			wantProblem(t, resp, b, http.StatusMethodNotAllowed, mockserver.ProblemMethodNotAllowed)
			if got := resp.Header.Get("Allow"); got != rt.allow {
				t.Errorf("%s %s: Allow %q, want %q", method, rt.path, got, rt.allow)
			}
		}
	}
}

// TestDocumentedMethodsAnswer checks that every documented route answers
// its documented methods: none of them is 404 or 405.
func TestDocumentedMethodsAnswer(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	bodies := map[string]string{"/_mock/delay": `{"delay_ms":0}`, "/_mock/latency": `{"latency_ms":0}`}
	for _, rt := range documentedRoutes {
		for _, method := range strings.Split(rt.allow, ", ") {
			resp, b := mustSend(t, srv, method, rt.path, "", bodies[rt.path])
			if resp.StatusCode == http.StatusMethodNotAllowed ||
				(resp.StatusCode == http.StatusNotFound && rt.path != "/payments/pay_1") {
				t.Errorf("%s %s: %d %s", method, rt.path, resp.StatusCode, b)
			}
		}
	}
}

// TestLatencyIsPUT: PUT /_mock/latency, as documented, sets the latency;
// POST is refused with 405 and sets nothing.
func TestLatencyIsPUT(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	resp, b := mustSend(t, srv, "POST", "/_mock/latency", "", `{"latency_ms":7}`)
	wantProblem(t, resp, b, http.StatusMethodNotAllowed, mockserver.ProblemMethodNotAllowed)
	if resp.Header.Get("Allow") != "PUT" {
		t.Errorf("Allow %q, want PUT", resp.Header.Get("Allow"))
	}
	if l := srv.Faults().Latency; l != 0 {
		t.Errorf("POST /_mock/latency set a latency of %v", l)
	}
	resp, b = mustSend(t, srv, "PUT", "/_mock/latency", "", `{"latency_ms":7}`)
	if resp.StatusCode != http.StatusOK || srv.Faults().LatencyMS != 7 {
		t.Errorf("PUT /_mock/latency: %d %s, latency %v", resp.StatusCode, b, srv.Faults().Latency)
	}
}

// TestUnknownPathIs404Problem: a path outside the API, or under
// AdminPrefix but not an endpoint, is a 404 problem whatever the method.
func TestUnknownPathIs404Problem(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for _, path := range []string{"/", "/nothing", "/payments/a/b", "/_mock/", "/_mock/nothing"} {
		for _, method := range []string{"GET", "POST"} {
			resp, b := mustSend(t, srv, method, path, "", "")
			wantProblem(t, resp, b, http.StatusNotFound, mockserver.ProblemNotFound)
		}
	}
}

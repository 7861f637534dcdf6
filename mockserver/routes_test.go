package mockserver_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
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

// TestPaymentRoutePattern: a payment reaches the handler, and the
// Middleware's hook, with the ServeMux pattern matched as Request.Pattern
// ("/payments", the http.route of the metrics), whether its path is
// written plain or with a letter escaped, which the mux unescapes.
func TestPaymentRoutePattern(t *testing.T) {
	var mu sync.Mutex
	var handler, hook []string
	srv := mockserver.New(
		mockserver.WithHandlerMiddleware(func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				handler = append(handler, r.Pattern)
				mu.Unlock()
				next.ServeHTTP(w, r)
			})
		}),
		mockserver.WithIdempotencyOptions(idempotency.WithHook(func(ev idempotency.Event) {
			mu.Lock()
			hook = append(hook, ev.Route)
			mu.Unlock()
		})))
	defer srv.Close()
	for i, path := range []string{"/payments", "/pay%6Dents"} {
		resp, b := mustSend(t, srv, http.MethodPost, path, "route-key-"+strconv.Itoa(i), `{"amount":1,"currency":"EUR","recipient":"acct_1"}`)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"/payments", "/payments"}; !slices.Equal(handler, want) || !slices.Equal(hook, want) {
		t.Errorf("Request.Pattern in the handler %q, Event.Route %q; want %q", handler, hook, want)
	}
}

package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestFingerprintKeepsStrippedPrefix mounts the Middleware under
// http.StripPrefix for two API versions that share a store: a key used on
// /v1/pay and then sent with the same body to /v2/pay is another route,
// a mismatch (422), not a replay of the v1 answer, although both handlers
// see the path /pay.
func TestFingerprintKeepsStrippedPrefix(t *testing.T) {
	store := newStore(t)
	version := func(v string) http.Handler {
		return idempotency.Middleware(store)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "charged by "+v+" at "+r.URL.Path)
		}))
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", http.StripPrefix("/v1", version("v1")))
	mux.Handle("/v2/", http.StripPrefix("/v2", version("v2")))
	do := func(target string) *httptest.ResponseRecorder {
		return post(mux, "k-prefix", `{"amount":1500}`, atTarget(target))
	}
	first := do("/v1/pay")
	if first.Code != http.StatusCreated {
		t.Fatalf("first = %d %s", first.Code, first.Body)
	}
	wantProblem(t, do("/v2/pay"), http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
	wantReplay(t, do("/v1/pay"), first)
}

// TestFingerprintRequestTargetForms checks that the request target the
// client sent only counts when a handler changed r.URL from it: its
// absolute form and its spellings that parse to the same URL give the
// fingerprint of a request built without one.
func TestFingerprintRequestTargetForms(t *testing.T) {
	for _, tt := range []struct{ target, url string }{
		{"/pay?b=2&a=1", "/pay?b=2&a=1"},
		{"http://api.example/pay?b=2&a=1", "/pay?b=2&a=1"},
		{"/a{b}", "/a%7Bb%7D"},
		{"/pay%2Fx?", "/pay%2Fx"},
	} {
		r := httptest.NewRequest(http.MethodPost, tt.target, nil)
		bare := httptest.NewRequest(http.MethodPost, tt.url, nil)
		bare.RequestURI = ""
		if a, b := idempotency.Fingerprint(r, []byte("x")), idempotency.Fingerprint(bare, []byte("x")); a != b {
			t.Errorf("target %s: fingerprint differs from that of %s without a RequestURI", tt.target, tt.url)
		}
	}
}

// TestFingerprintQueryRemovedInFront mounts the Middleware behind a handler
// that checks a signed query (ts, sig) and removes it from r.URL before the
// application sees it, alone and under http.StripPrefix. A client that signs
// every attempt anew (a signing RoundTripper under the retrying one) sends
// another ts and sig on its retry: the handler reads the same request, so
// the retry is a replay of the first answer, not a key reused (422).
func TestFingerprintQueryRemovedInFront(t *testing.T) {
	unsign := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			q.Del("ts")
			q.Del("sig")
			r.URL.RawQuery = q.Encode()
			next.ServeHTTP(w, r)
		})
	}
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "charged at "+r.URL.RequestURI())
	})
	for _, tt := range []struct {
		name, prefix string
	}{{"alone", ""}, {"under StripPrefix", "/v1"}} {
		t.Run(tt.name, func(t *testing.T) {
			h := unsign(idempotency.Middleware(newStore(t))(app))
			if tt.prefix != "" {
				h = http.StripPrefix(tt.prefix, h)
			}
			do := func(ts string) *httptest.ResponseRecorder {
				return post(h, "k-signed", `{"amount":1500}`, atTarget(tt.prefix+"/pay?to=acct_1&ts="+ts+"&sig=s"+ts))
			}
			first := do("1700000000")
			if first.Code != http.StatusCreated {
				t.Fatalf("first = %d %s", first.Code, first.Body)
			}
			wantReplay(t, do("1700000007"), first)
		})
	}
}

package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestFingerprintPathEscapeCase: the hex digits of a percent-encoding are
// case-insensitive (RFC 3986, section 6.2.2.1), so /pay/a%2fb is the URI
// /pay/a%2Fb is. A client or proxy that re-encodes the path with the
// other case on its retry sends the same request: a replay, not a key
// reused (422), also when a handler in front stripped a prefix. An
// escaped slash still differs from a slash, and the fingerprint of a path
// without a lower-case escape is its v1 fingerprint (the golden file).
func TestFingerprintPathEscapeCase(t *testing.T) {
	at := func(target string) string {
		return idempotency.Fingerprint(httptest.NewRequest(http.MethodPost, target, nil), []byte(`{}`))
	}
	for _, pair := range [][2]string{
		{"/pay/a%2Fb", "/pay/a%2fb"},
		{"/pay/%C3%A9", "/pay/%c3%a9"},
		{"/pay/%C3%A9", "/pay/%c3%A9"},
		{"/pay/%2F%3F?q=%2f", "/pay/%2f%3f?q=%2f"},
	} {
		if at(pair[0]) != at(pair[1]) {
			t.Errorf("%s and %s fingerprint differently; they are one URI", pair[0], pair[1])
		}
	}
	for _, pair := range [][2]string{
		{"/pay/a%2fb", "/pay/a/b"},
		{"/pay/%2f", "/pay/%2F%2F"},
		{"/pay/a?q=%2f", "/pay/a?q=%2F%2F"},
	} {
		if at(pair[0]) == at(pair[1]) {
			t.Errorf("%s and %s share a fingerprint", pair[0], pair[1])
		}
	}

	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "charged at "+r.URL.EscapedPath())
	})
	for _, prefix := range []string{"", "/v1"} {
		var h http.Handler = idempotency.Middleware(newStore(t))(app)
		if prefix != "" {
			h = http.StripPrefix(prefix, h)
		}
		first := post(h, "k-case", `{}`, atTarget(prefix+"/pay/acct%2f1"))
		if first.Code != http.StatusCreated {
			t.Fatalf("prefix %q: first = %d %s", prefix, first.Code, first.Body)
		}
		wantReplay(t, post(h, "k-case", `{}`, atTarget(prefix+"/pay/acct%2F1")), first)
		wantProblem(t, post(h, "k-case", `{}`, atTarget(prefix+"/pay/acct/1")), http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
	}
}

// TestFingerprintPathEscapeCaseAllocations: setting the case of a path's
// escapes costs at most the one string of the path re-cased, and only a
// path with a lower-case escape (TestReplayAllocations holds the count of
// a request whose path has no escape).
func TestFingerprintPathEscapeCaseAllocations(t *testing.T) {
	if testenv.RaceEnabled {
		t.Skip("allocation counts differ under the race detector (sync.Pool drops what is put back); run without -race")
	}
	allocs := func(target string) float64 {
		r := httptest.NewRequest(http.MethodPost, target, nil)
		return testing.AllocsPerRun(200, func() { idempotency.Fingerprint(r, []byte(`{}`)) })
	}
	upper := allocs("/pay/a%2Fb")
	if n := allocs("/pay/a%2fb"); n > upper+1 {
		t.Errorf("a path with lower-case escapes allocates %.0f times, with upper-case ones %.0f; want at most one more", n, upper)
	}
}

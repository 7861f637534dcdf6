package mockserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/mockserver"
)

// TestPaymentMediaTypeKeyChangedDetail: the detail of the 503
// ProblemKeyChanged says what happened to the key: that its record went
// away, when requireJSON found one, and not when it found none because
// its lookup failed (the record may never have existed).
func TestPaymentMediaTypeKeyChangedDetail(t *testing.T) {
	detail := func(t *testing.T, b []byte) string {
		t.Helper()
		var p struct{ Detail string }
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		return p.Detail
	}
	h := http.Header{"Idempotency-Key": {"changed"}, "Content-Type": {"text/plain"}}

	t.Run("unlooked", func(t *testing.T) {
		ms := memstore.New()
		t.Cleanup(func() { ms.Close() })
		fail := new(atomic.Bool)
		srv := mockserver.New(mockserver.WithStore(flakyGetStore{ms, fail}))
		defer srv.Close()
		fail.Store(true)
		resp, b := sendHeaders(t, srv, h.Clone(), payBody)
		wantProblem(t, resp, b, http.StatusServiceUnavailable, mockserver.ProblemKeyChanged)
		if d := detail(t, b); strings.Contains(d, "went away") || !strings.Contains(d, "could not be looked up") {
			t.Errorf("detail %q, after a lookup that failed; want it to say that the key could not be looked up, not that its record went away", d)
		}
	})

	t.Run("gone", func(t *testing.T) {
		var srv *mockserver.Server
		var expire atomic.Bool
		ms := memstore.New()
		t.Cleanup(func() { ms.Close() })
		srv = mockserver.New(mockserver.WithStore(getHookStore{Store: ms, hook: func() {
			if expire.CompareAndSwap(true, false) {
				srv.ExpireKeys()
			}
		}}))
		defer srv.Close()
		if _, resp, b := sendTyped(t, srv, "changed", []string{"application/json"}, payBody); resp.StatusCode != http.StatusCreated {
			t.Fatalf("first attempt: %d %s", resp.StatusCode, b)
		}
		expire.Store(true)
		resp, b := sendHeaders(t, srv, h.Clone(), payBody)
		wantProblem(t, resp, b, http.StatusServiceUnavailable, mockserver.ProblemKeyChanged)
		if d := detail(t, b); !strings.Contains(d, "went away") {
			t.Errorf("detail %q, after the record found went away; want it to say so", d)
		}
	})
}

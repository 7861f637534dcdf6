package mockserver_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/mockserver"
)

// TestPaymentMediaTypeRefusedNeverPays: a retry with a refused media type
// passed to the idempotency Middleware (its key's lookup failed) that
// finds the key free runs under a claim that holds nothing, and must not
// reach the payment handler, even when a handler middleware inside the
// Middleware (WithHandlerMiddleware) drops the Content-Encoding that got
// it refused: it paid, under no claim, and was answered 409.
func TestPaymentMediaTypeRefusedNeverPays(t *testing.T) {
	ms := memstore.New()
	t.Cleanup(func() { ms.Close() })
	fail := new(atomic.Bool)
	srv := mockserver.New(mockserver.WithStore(flakyGetStore{ms, fail}), mockserver.WithHandlerMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Del("Content-Encoding") // as a decoding middleware would, after decoding
			next.ServeHTTP(w, r)
		})
	}))
	defer srv.Close()
	fail.Store(true) // requireJSON's lookup fails; the Middleware's finds nothing
	h := http.Header{"Idempotency-Key": {"never-paid"}, "Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	resp, b := sendHeaders(t, srv, h, payBody)
	if n := len(srv.Payments()); n != 0 {
		t.Errorf("%d payments made for a refused request, want none", n)
	}
	if n := srv.Executions("never-paid"); n != 0 {
		t.Errorf("%d executions of a refused request, want none", n)
	}
	wantProblem(t, resp, b, http.StatusServiceUnavailable, mockserver.ProblemKeyChanged)
}

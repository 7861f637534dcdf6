package interop_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

// TestRedirectedOperationRuns: a POST that the server redirects with a
// same-origin 308 is followed by saferetry.Client with the same key and
// body, as the contract has it. The middleware stored the 308 under the
// key, with the first URI's fingerprint, so the request at the new URI was
// a reuse of the key with another payload: 422, and the operation never
// ran. 307 and 308 are now not stored: the operation runs once, at the new
// URI, and a retry of it there replays its answer. Found by two review
// helpers, one on each side.
func TestRedirectedOperationRuns(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		var runs atomic.Int64
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/debits", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/v2/debits", status)
		})
		mux.HandleFunc("POST /v2/debits", func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"d1"}`)
		})
		store := memstore.New()
		defer store.Close()
		srv := httptest.NewServer(idempotency.Middleware(store)(mux))
		defer srv.Close()
		do := func(path string) *http.Response {
			ctx := saferetry.WithKey(context.Background(), "op-1") // the same operation both times
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader(`{"amount":100}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := saferetry.NewClient().Do(req)
			if err != nil {
				t.Fatalf("%d: %v (the operation ran %d times)", status, err, runs.Load())
			}
			resp.Body.Close()
			return resp
		}
		if resp := do("/v1/debits"); resp.StatusCode != http.StatusCreated || runs.Load() != 1 {
			t.Fatalf("%d: status %d after %d runs; want 201 and one run", status, resp.StatusCode, runs.Load())
		}
		if resp := do("/v2/debits"); resp.StatusCode != http.StatusCreated || resp.Header.Get(idempotency.HeaderReplayed) != "true" || runs.Load() != 1 {
			t.Errorf("%d: the retry at the new URI answered %d (replayed %q) after %d runs; want the replay",
				status, resp.StatusCode, resp.Header.Get(idempotency.HeaderReplayed), runs.Load())
		}
	}
}

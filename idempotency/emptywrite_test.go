package idempotency_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// Like net/http's own writer, the Middleware's takes an empty Write after
// a status without a body (204), and refuses a non-empty one.
func TestEmptyWriteAfter204(t *testing.T) {
	var empty, full error
	h := idempotency.Middleware(newStore(t))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		_, empty = w.Write(nil)
		_, full = w.Write([]byte("x"))
	}))
	r := httptest.NewRequest(http.MethodPost, "/ops", strings.NewReader(`{}`))
	r.Header.Set(idempotency.HeaderIdempotencyKey, "k-204")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusNoContent || empty != nil || full != http.ErrBodyNotAllowed {
		t.Errorf("status %d; empty Write = %v, want nil; Write of a byte = %v, want ErrBodyNotAllowed", w.Code, empty, full)
	}
}

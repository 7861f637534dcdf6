package pgstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/saferetry/saferetry/idempotency"
)

// postPayment sends one protected POST /payments with key through h, on
// ctx, and returns the answer.
func postPayment(ctx context.Context, h http.Handler, key string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1}`)).WithContext(ctx)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(idempotency.HeaderIdempotencyKey, key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

package mockserver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/mockserver"
)

// TestPaymentBodyUpToTheKeyLimit: a payment body is read up to the limit
// that the idempotency Middleware takes (WithMaxRequestBody, given with
// WithIdempotencyOptions, and the x-idempotency policy's maxBodyBytes),
// and one over it is a 413 that stores nothing. Above 1 MiB the handler
// refused such a body with a 400 "body is too large", stored and
// replayed for the key, that named no limit.
func TestPaymentBodyUpToTheKeyLimit(t *testing.T) {
	const limit = 4 << 20
	srv := mockserver.New(mockserver.WithIdempotencyOptions(idempotency.WithMaxRequestBody(limit)))
	defer srv.Close()
	body := `{"amount":1,"currency":"EUR","recipient":"a","memo":"` + strings.Repeat("x", 2<<20) + `"}`
	if resp, b := mustSend(t, srv, http.MethodPost, "/payments", "2mib", body); resp.StatusCode != http.StatusCreated {
		t.Errorf("a payment of 2 MiB under a limit of 4 MiB: %d %.300s, want 201", resp.StatusCode, b)
	}
	body = `{"amount":1,"currency":"EUR","recipient":"a","memo":"` + strings.Repeat("x", limit) + `"}`
	resp, b := mustSend(t, srv, http.MethodPost, "/payments", "over", body)
	wantProblem(t, resp, b, http.StatusRequestEntityTooLarge, idempotency.ProblemRequestTooLarge)
}

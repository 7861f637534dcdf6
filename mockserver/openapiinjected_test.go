package mockserver_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/saferetry/saferetry/internal/openapitest"
	"github.com/saferetry/saferetry/mockserver"
)

// TestOpenAPIInjectedFailures checks the answer of a failure injected
// with each status that FailNext (POST /_mock/fail) takes, 400 to 599,
// against the server's description: each is an answer that POST
// /payments can give, so its status, body and headers must be
// documented, also where the status is one the idempotency Middleware
// answers with headers of its own (a 409's Retry-After, a 410's
// Idempotent-Replayed) that an injected failure does not carry.
func TestOpenAPIInjectedFailures(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	doc := openapitest.Load(t, srv.OpenAPI())
	for status := 400; status <= 599; status++ {
		srv.FailNext(1, status)
		key := "injected-" + strconv.Itoa(status)
		checked(t, doc, srv, http.MethodPost, "/payments", key, payBody, status, true)
	}
}

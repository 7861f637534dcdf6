package mockserver_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/saferetry/saferetry/mockserver"
)

// TestHandlerSetsConnectionDeadlines: a handler under the claim, wrapped
// with WithHandlerMiddleware, sets its connection's read and write
// deadlines through http.ResponseController, as the idempotency
// Middleware's writer lets it (it passes them on to the writer
// underneath): the mock server's own writer in between passes them on too.
func TestHandlerSetsConnectionDeadlines(t *testing.T) {
	errs := make(chan error, 2)
	srv := mockserver.New(mockserver.WithHandlerMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			errs <- rc.SetReadDeadline(time.Now().Add(time.Minute))
			errs <- rc.SetWriteDeadline(time.Now().Add(time.Minute))
			next.ServeHTTP(w, r)
		})
	}))
	defer srv.Close()

	resp, body := mustSend(t, srv, http.MethodPost, "/payments", "deadlines-1", payBody)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status = %d, want 201; body %s", resp.StatusCode, body)
	}
	for _, what := range []string{"SetReadDeadline", "SetWriteDeadline"} {
		if err := <-errs; err != nil {
			t.Errorf("%s through the handler's writer: %v", what, err)
		}
	}
}

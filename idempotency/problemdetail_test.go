package idempotency_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

// failingBody is a request body whose read fails, as a malformed chunked
// body does under net/http.
type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, errors.New("invalid byte in chunk length") }
func (failingBody) Close() error             { return nil }

// TestProblemsHaveDetail: every problem of the Middleware carries a
// detail, for a client in any language to show, the unreadable body's
// (400) and the failed scope's (500) too, which had none.
func TestProblemsHaveDetail(t *testing.T) {
	app := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	h := idempotency.Middleware(memstore.New())(app)
	w := post(h, "unreadable", "", func(r *http.Request) { r.Body = failingBody{} })
	if p := wantProblem(t, w, http.StatusBadRequest, idempotency.ProblemBodyUnreadable); !strings.Contains(p.Detail, "invalid byte in chunk length") {
		t.Errorf("unreadable body: detail %q, want one that says why", p.Detail)
	}

	failing := idempotency.WithScope(func(*http.Request) (string, error) { return "", io.ErrUnexpectedEOF })
	h = idempotency.Middleware(memstore.New(), failing)(app)
	if p := wantProblem(t, post(h, "scope", `{}`), http.StatusInternalServerError, idempotency.ProblemScopeUnavailable); p.Detail == "" {
		t.Error("failed scope: no detail")
	}
}

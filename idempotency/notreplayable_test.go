package idempotency_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestNotReplayableProblemFitsEachCause: an operation that completed with
// an answer that is not replayable, because it was over
// WithMaxResponseBody or because it did not reach its client whole (a
// body shorter than its Content-Length), gets the one 410 of
// ProblemResponseTooLarge, a type URI clients match on. Its title names
// neither cause, so that it is true of both, and what documents it (the
// detail, the OpenAPI schema and response) names both.
func TestNotReplayableProblemFitsEachCause(t *testing.T) {
	causes := map[string]http.HandlerFunc{
		"over the cap": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, strings.Repeat("x", 32))
		},
		"not sent whole": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "10")
			_, _ = io.WriteString(w, "abc")
		},
	}
	for name, app := range causes {
		t.Run(name, func(t *testing.T) {
			h := idempotency.Middleware(newStore(t), idempotency.WithMaxResponseBody(16))(app)
			post(h, "k", `{}`)
			p := wantProblem(t, post(h, "k", `{}`), http.StatusGone, idempotency.ProblemResponseTooLarge)
			if lower := strings.ToLower(p.Title); strings.Contains(lower, "large") || strings.Contains(lower, "whole") {
				t.Errorf("title %q names one cause; want one that fits an answer too large and one not sent whole", p.Title)
			}
			namesBoth(t, "detail", p.Detail)
		})
	}

	var doc struct {
		Components struct {
			Schemas   map[string]struct{ Description string } `json:"schemas"`
			Responses map[string]struct{ Description string } `json:"responses"`
		} `json:"components"`
	}
	b, err := json.Marshal(idempotency.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	namesBoth(t, "OpenAPI schema", doc.Components.Schemas["IdempotencyProblemResponseTooLarge"].Description)
	namesBoth(t, "OpenAPI response", doc.Components.Responses["IdempotencyResponseTooLarge"].Description)
}

// namesBoth checks that text, describing the 410, names both causes of an
// answer that is not replayable.
func namesBoth(t *testing.T, what, text string) {
	t.Helper()
	if lower := strings.ToLower(text); !strings.Contains(lower, "too large") || !strings.Contains(lower, "whole") {
		t.Errorf("%s %q; want it to name both causes: too large, and not sent whole", what, text)
	}
}

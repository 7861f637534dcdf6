package idempotency_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// headerPanicWriter is a ResponseWriter whose Header panics, as a buggy
// writer wrapped around the Middleware's might.
type headerPanicWriter struct{ *httptest.ResponseRecorder }

func (headerPanicWriter) Header() http.Header { panic("writer bug") }

// TestWriterPanicOnReplayGivesOneEvent checks that a replay whose
// ResponseWriter panics as the stored answer is written still gives its
// one event, OutcomeReplay, and the writer's panic goes on as it was: the
// replay's headers used to be set before the event was given, so the
// request gave none.
func TestWriterPanicOnReplayGivesOneEvent(t *testing.T) {
	var ev events
	h := idempotency.Middleware(newStore(t), idempotency.WithHook(ev.hook))(&counter{})
	post(h, "k", `{}`)
	p := func() (p any) {
		defer func() { p = recover() }()
		r := httptest.NewRequest(http.MethodPost, "/ops?b=2&a=1", strings.NewReader(`{}`)) // as post sends it
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(idempotency.HeaderIdempotencyKey, "k")
		h.ServeHTTP(headerPanicWriter{httptest.NewRecorder()}, r)
		return nil
	}()
	if p != "writer bug" {
		t.Fatalf("panic %v went on, want the writer's", p)
	}
	if got := ev.outcomes(); len(got) != 2 || got[1] != idempotency.OutcomeReplay {
		t.Errorf("events %v, want new, then one replay", got)
	}
}

package mockserver

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/loadgen"
)

// BenchmarkHandler is one POST /payments with a fresh key served in
// process (no network), by the mock server over memory, by the idempotency
// middleware over memory around a trivial handler, and by the trivial
// handler alone: what the server adds per request, for instruction counts
// (callgrind) that the loopback benchmark's noise hides.
func BenchmarkHandler(b *testing.B) {
	trivial := http.HandlerFunc(loadgen.PaymentAnchor)
	run := func(b *testing.B, h http.Handler) {
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1,"currency":"EUR","recipient":"acct_1"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", uuid.NewString())
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != http.StatusCreated {
				b.Fatalf("status %d: %s", w.Code, w.Body)
			}
		}
	}
	b.Run("trivial", func(b *testing.B) { run(b, trivial) })
	b.Run("middleware", func(b *testing.B) {
		st := memstore.New()
		defer st.Close()
		run(b, idempotency.Middleware(st, idempotency.WithKeyRequired(true))(trivial))
	})
	b.Run("mockserver", func(b *testing.B) {
		s := New(WithBalance("EUR", 1<<62))
		defer s.Close()
		run(b, s.ts.Config.Handler)
	})
}

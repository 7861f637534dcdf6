package otelidempotency_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/otelidempotency"
)

// BenchmarkInstrumentation runs a new operation and its replay through the
// Middleware over a memstore per iteration: without instrumentation (off),
// and with the hook, the store wrapper and the handler wrapper recording
// into the SDK (on).
func BenchmarkInstrumentation(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			store := newStore(b)
			var h http.Handler
			if on {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
				h = serve(otelidempotency.New(otelidempotency.WithMeterProvider(mp)), store, app{})
			} else {
				mux := http.NewServeMux()
				mux.Handle("POST /payments", idempotency.Middleware(store)(app{}))
				h = mux
			}
			r := httptest.NewRequest(http.MethodPost, "/payments", nil)
			r.Header.Set("Content-Type", "application/json")
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				key := "bench-" + strconv.Itoa(i)
				for range 2 { // the run, then its replay
					r.Body = nopCloser{strings.NewReader(body)}
					r.Header.Set(idempotency.HeaderIdempotencyKey, key)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusCreated {
						b.Fatalf("status %d", w.Code)
					}
				}
			}
		})
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

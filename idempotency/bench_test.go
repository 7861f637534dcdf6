package idempotency_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/benchratio"
)

// benchBody is a 100-byte JSON request body.
var benchBody = []byte(`{"account":"acct_0123456789","amount":12345,"currency":"EUR","memo":"benchmark payment number 0001"}`)

type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

var benchResponse = []byte(`{"id":"op_1","status":"accepted"}`)

func benchApp() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(benchResponse)
	})
}

// runBench sends b.N POSTs through h; key(i) names the key of the i-th.
func runBench(b *testing.B, h http.Handler, key func(i int) string) {
	if len(benchBody) != 100 {
		b.Fatalf("body is %d bytes", len(benchBody))
	}
	r, _ := http.NewRequest(http.MethodPost, "http://example.com/payments", nil)
	r.Header.Set("Content-Type", "application/json")
	br := bytes.NewReader(benchBody)
	w := &discardWriter{h: make(http.Header)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		br.Reset(benchBody)
		r.Body = io.NopCloser(br)
		r.ContentLength = int64(len(benchBody))
		if key != nil {
			r.Header[idempotency.HeaderIdempotencyKey] = []string{key(i)}
		}
		clear(w.h)
		w.status = 0
		h.ServeHTTP(w, r)
		if w.status != http.StatusCreated {
			b.Fatalf("status %d", w.status)
		}
	}
}

func BenchmarkMiddleware(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		runBench(b, benchApp(), nil)
	})
	b.Run("first", func(b *testing.B) {
		st := newStore(b, memstore.WithMaxEntries(math.MaxInt), memstore.WithMaxBytes(math.MaxInt64)) // b.N new keys

		h := idempotency.Middleware(st)(benchApp())
		keys := make([]string, b.N)
		for i := range keys {
			keys[i] = "key-" + strconv.Itoa(i)
		}
		runBench(b, h, func(i int) string { return keys[i] })
	})
	b.Run("replay", func(b *testing.B) {
		st := newStore(b)
		h := idempotency.Middleware(st)(benchApp())
		runBench(b, h, func(int) string { return "the-key" })
	})
}

// BenchmarkFingerprint measures the body canonicaliser through Fingerprint:
// lower-case names, camelCase names (no two fold equal), a nested body,
// and the rare object whose names differ only in case.
func BenchmarkFingerprint(b *testing.B) {
	var items []byte
	for i := range 10 {
		items = append(items, `{"sku":"SKU-`+strconv.Itoa(i)+`","unitPrice":`+strconv.Itoa(100+i)+`,"qty":2,"Tags":["a","b"]},`...)
	}
	bodies := []struct {
		name string
		body []byte
	}{
		{"lower", benchBody},
		{"camel", []byte(`{"accountId":"acct_0123456789","amountMinor":12345,"currencyCode":"EUR","memoText":"benchmark payment"}`)},
		{"nested", []byte(`{"orderId":"ord_1","customer":{"name":"A","Email":"a@example.com"},"items":[` + string(items[:len(items)-1]) + `],"total":2090}`)},
		{"collision", []byte(`{"amount":100,"Amount":5,"currency":"EUR","memo":"benchmark payment number 0001"}`)},
	}
	for _, bb := range bodies {
		b.Run(bb.name, func(b *testing.B) {
			r, _ := http.NewRequest(http.MethodPost, "http://example.com/payments", nil)
			r.Header.Set("Content-Type", "application/json")
			b.SetBytes(int64(len(bb.body)))
			b.ReportAllocs()
			for b.Loop() {
				idempotency.Fingerprint(r, bb.body)
			}
		})
	}
}

// BenchmarkFingerprintRatio runs Fingerprint against its raw anchor,
// json.Valid and SHA-256 over the same bytes, alternately (see
// internal/benchratio): API-shaped bodies of 1 KiB, 64 KiB and 1 MiB (an
// array of records whose members are not in order), one object of 30,000
// members in no order (wide), and 1 MiB nested 511 objects deep, each level
// out of order.
func BenchmarkFingerprintRatio(b *testing.B) {
	bodies := []struct {
		name string
		body []byte
	}{
		{"1KB", recordsJSON(1 << 10)},
		{"64KB", recordsJSON(64 << 10)},
		{"1MB", recordsJSON(1 << 20)},
		{"wide-1MB", flatJSON(1 << 20)},
		{"deep511-1MB", deepJSON(1<<20, 511)},
	}
	for _, bb := range bodies {
		b.Run(bb.name, func(b *testing.B) {
			r, _ := http.NewRequest(http.MethodPost, "http://example.com/payments", nil)
			r.Header.Set("Content-Type", "application/json")
			b.SetBytes(int64(len(bb.body)))
			var sink [sha256.Size]byte
			benchratio.Run(b, func(n int) {
				for range n {
					idempotency.Fingerprint(r, bb.body)
				}
			}, func(n int) {
				for range n {
					if json.Valid(bb.body) {
						sink = sha256.Sum256(bb.body)
					}
				}
			})
			_ = sink
		})
	}
}

// BenchmarkFingerprintDepth runs Fingerprint over 1 MiB nested 511
// objects deep, each level out of order, against the same bytes one level
// deep, alternately: the ratio is the cost of depth.
func BenchmarkFingerprintDepth(b *testing.B) {
	deep, flat := deepJSON(1<<20, 511), deepJSON(1<<20, 1)
	r, _ := http.NewRequest(http.MethodPost, "http://example.com/payments", nil)
	r.Header.Set("Content-Type", "application/json")
	b.SetBytes(int64(len(deep)))
	benchratio.Run(b, func(n int) {
		for range n {
			idempotency.Fingerprint(r, deep)
		}
	}, func(n int) {
		for range n {
			idempotency.Fingerprint(r, flat)
		}
	})
}

// BenchmarkMiddlewareRatio runs the Middleware over a memstore against the
// trivial handler it wraps, alternately (see internal/benchratio): first
// executions (a new key each) and replays.
func BenchmarkMiddlewareRatio(b *testing.B) {
	bare := newBenchLoop(b, benchApp())
	b.Run("first", func(b *testing.B) {
		st := newStore(b, memstore.WithMaxEntries(math.MaxInt), memstore.WithMaxBytes(math.MaxInt64))
		first := newBenchLoop(b, idempotency.Middleware(st)(benchApp()))
		keys := make([]string, b.N)
		for i := range keys {
			keys[i] = "key-" + strconv.Itoa(i)
		}
		next := 0
		benchratio.Run(b, func(n int) {
			first.run(b, n, func() string { next++; return keys[next-1] })
		}, func(n int) { bare.run(b, n, nil) })
	})
	b.Run("replay", func(b *testing.B) {
		replay := newBenchLoop(b, idempotency.Middleware(newStore(b))(benchApp()))
		key := func() string { return "the-key" }
		benchratio.Run(b, func(n int) { replay.run(b, n, key) }, func(n int) { bare.run(b, n, nil) })
	})
}

// benchLoop sends POSTs of benchBody through h, reusing one request, one
// body and one writer: it allocates nothing of its own per request unless
// each request gets a key of its own.
type benchLoop struct {
	h    http.Handler
	r    *http.Request
	body *rewindBody
	w    *discardWriter
}

// rewindBody is a request body read again and again without allocating.
type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

func newBenchLoop(tb testing.TB, h http.Handler) *benchLoop {
	r, err := http.NewRequest(http.MethodPost, "http://example.com/payments", nil)
	if err != nil {
		tb.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	return &benchLoop{h: h, r: r, body: &rewindBody{}, w: &discardWriter{h: make(http.Header)}}
}

// run sends n requests; key, if not nil, gives each one's key.
func (l *benchLoop) run(tb testing.TB, n int, key func() string) {
	for range n {
		l.body.Reset(benchBody)
		l.r.Body, l.r.ContentLength = l.body, int64(len(benchBody))
		if key != nil {
			l.r.Header[idempotency.HeaderIdempotencyKey] = []string{key()}
		}
		clear(l.w.h)
		l.w.status = 0
		l.h.ServeHTTP(l.w, l.r)
		if l.w.status != http.StatusCreated {
			tb.Fatalf("status %d", l.w.status)
		}
	}
}

package idempotency_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// fingerprintSpy is a Store that records the fingerprint of each Claim.
type fingerprintSpy struct {
	idempotency.Store
	fps []string
}

func (s *fingerprintSpy) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	s.fps = append(s.fps, fp)
	return s.Store.Claim(ctx, k, fp, lease, ttl)
}

// shortReader reads its string a few bytes at a time, so that a body's
// buffer fills over several reads.
type shortReader struct{ s string }

func (r *shortReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 7)], r.s)
	r.s = r.s[n:]
	return n, nil
}

// TestMiddlewareFingerprintIsFingerprint: the fingerprint the Middleware
// hands its store is Fingerprint's for the body it read, whether the
// body's buffer had room for the fingerprint's text (a short body of
// announced length) or not (a longer one, one of unknown length, one
// longer than it announced), and the handler reads the body as sent, its
// bytes untouched by the fingerprint written after them.
func TestMiddlewareFingerprintIsFingerprint(t *testing.T) {
	spy := &fingerprintSpy{Store: newStore(t)}
	var read []string
	h := idempotency.Middleware(spy)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the body: %v", err)
		}
		read = append(read, string(b))
		w.WriteHeader(http.StatusCreated)
	}))
	type body struct {
		text      string
		announced int64 // -1: unknown
	}
	var bodies []body
	for _, n := range []int{0, 1, 100, 120, 121, 188, 189, 190, 300, 5000} {
		text := `{"memo":"` + strings.Repeat("m", max(n-11, 0)) + `"}`
		if n < 11 {
			text = strings.Repeat("x", n)
		}
		bodies = append(bodies, body{text, int64(len(text))}, body{text, -1})
	}
	bodies = append(bodies, body{strings.Repeat("y", 150), 20}, body{strings.Repeat("z", 60), 3})
	for i, b := range bodies {
		r := httptest.NewRequest(http.MethodPost, "/payments", nil)
		r.Body, r.ContentLength = io.NopCloser(&shortReader{b.text}), b.announced
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(idempotency.HeaderIdempotencyKey, `"k-`+strconv.Itoa(i)+`"`)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			t.Fatalf("body %d (%d bytes, announced %d): status %d", i, len(b.text), b.announced, w.Code)
		}
		want := idempotency.Fingerprint(r, []byte(b.text))
		if got := spy.fps[len(spy.fps)-1]; got != want {
			t.Errorf("body %d (%d bytes, announced %d): the store got %q, want %q", i, len(b.text), b.announced, got, want)
		}
		if got := read[len(read)-1]; got != b.text {
			t.Errorf("body %d (%d bytes, announced %d): the handler read %q, want %q", i, len(b.text), b.announced, got, b.text)
		}
	}
}

// TestMiddlewareFingerprintKeepsLittle: a store may keep the fingerprint
// string it is given (for its entry's lifetime), and what that keeps alive
// is the fingerprint and at most the allocation of a short body of
// announced length (sharedBodyMax, 256 bytes), not the buffer of a body of
// unknown length, nor one grown past what was announced.
func TestMiddlewareFingerprintKeepsLittle(t *testing.T) {
	for _, c := range []struct {
		name      string
		size      int
		announced int64 // -1: unknown
	}{
		{"unknown length, 300 bytes", 300, -1},
		{"unknown length, 70000 bytes", 70000, -1},
		{"200 bytes, 100 announced", 200, 100},
		{"100 bytes, announced", 100, 100}, // shares an allocation of up to 256 bytes
	} {
		t.Run(c.name, func(t *testing.T) {
			// What a kept fingerprint keeps is the same every time; the
			// heap's other movements between the two readings (an earlier
			// test's goroutine finishing, under -race and a loaded CI
			// machine) only add to the difference. So the least of a few
			// readings is the figure.
			least := int64(math.MaxInt64)
			for range 5 {
				if least = min(least, keptPerFingerprint(t, c.size, c.announced)); least <= 256 {
					break
				}
			}
			t.Logf("%d bytes a kept fingerprint", least)
			if least > 256 {
				t.Errorf("a kept fingerprint keeps %d bytes alive, want at most 256", least)
			}
		})
	}
}

// keptPerFingerprint is the heap that 64 fingerprints kept by a store
// (see keptFingerprints) keep alive, over 64.
func keptPerFingerprint(t *testing.T, size int, announced int64) int64 {
	const n = 64
	kept := keptFingerprints(t, n, size, announced)
	var with, without runtime.MemStats
	runtime.GC() // twice, so that the pools' victims go too
	runtime.GC()
	runtime.ReadMemStats(&with)
	runtime.KeepAlive(kept)
	kept = nil
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&without)
	return (int64(with.HeapAlloc) - int64(without.HeapAlloc)) / n
}

// keptFingerprints sends n requests with bodies of size bytes (announced
// as announced) through the Middleware and returns the fingerprints its
// store was given, the store and everything else let go.
func keptFingerprints(t *testing.T, n, size int, announced int64) []string {
	spy := &fingerprintSpy{Store: newStore(t)}
	h := idempotency.Middleware(spy)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	text := strings.Repeat("b", size)
	for i := range n {
		r := httptest.NewRequest(http.MethodPost, "/payments", nil)
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader(text)), announced
		r.Header.Set("Content-Type", "application/octet-stream")
		r.Header.Set(idempotency.HeaderIdempotencyKey, `"k-`+strconv.Itoa(i)+`"`)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated {
			t.Fatalf("status %d", w.Code)
		}
	}
	kept := spy.fps
	spy.fps = nil // the Middleware may outlive this call, and the spy with it
	return kept
}

package memstore

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// lowerMaxBodyLen sets maxBodyLen to n for the test.
func lowerMaxBodyLen(t *testing.T, n int) {
	old := maxBodyLen
	maxBodyLen = n
	t.Cleanup(func() { maxBodyLen = old })
}

// TestCompleteRefusesABodyLongerThanItsLength: a body longer than the
// int32 the store keeps its length in (2 GiB and more, with the
// Middleware's and the store's limits raised) is refused with
// ErrResponseNotStorable and changes nothing, so that the Middleware
// records the outcome as not replayable; it is never kept with a length
// that wrapped. The limit is lowered to 64 bytes here.
func TestCompleteRefusesABodyLongerThanItsLength(t *testing.T) {
	lowerMaxBodyLen(t, 64)
	ctx := context.Background()
	s, _ := newFake(t)
	k, fits := idempotency.Key{Key: "long"}, idempotency.Key{Key: "fits"}
	r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatalf("Claim = %+v, %v", r, err)
	}
	long := idempotency.Response{Status: 201, Body: bytes.Repeat([]byte{'x'}, 65)}
	if err := s.Complete(ctx, k, r.Token, long, time.Hour); !errors.Is(err, idempotency.ErrResponseNotStorable) {
		t.Fatalf("Complete of a 65-byte body with a 64-byte length limit = %v, want ErrResponseNotStorable", err)
	}
	if e, found, err := s.Get(ctx, k); err != nil || !found || e.State != idempotency.StateInProgress || e.Token != r.Token {
		t.Fatalf("after the refused Complete Get = %+v, %v, %v; want the claim as it was", e, found, err)
	}
	if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Oversize: true}, time.Hour); err != nil {
		t.Fatalf("Complete as not replayable: %v", err)
	}
	if e, _, err := s.Get(ctx, k); err != nil || e.State != idempotency.StateCompleted || e.Response == nil || !e.Response.Oversize {
		t.Fatalf("Get = %+v, %v; want completed, not replayable", e, err)
	}

	r, err = s.Claim(ctx, fits, "fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatalf("Claim = %+v, %v", r, err)
	}
	body := bytes.Repeat([]byte{'y'}, 64)
	if err := s.Complete(ctx, fits, r.Token, idempotency.Response{Status: 201, Body: body}, time.Hour); err != nil {
		t.Fatalf("Complete of a body at the limit: %v", err)
	}
	if e, _, err := s.Get(ctx, fits); err != nil || e.Response == nil || !bytes.Equal(e.Response.Body, body) {
		t.Fatalf("Get = %+v, %v; want the 64-byte body", e, err)
	}
}

// TestMiddlewareAnswersGoneForABodyLongerThanItsLength: through the
// Middleware, such an answer reaches its client, and a retry gets the 410
// problem of a response too large to replay, as CONTRACT.md says, not a
// replay and not a second run of the handler.
func TestMiddlewareAnswersGoneForABodyLongerThanItsLength(t *testing.T) {
	lowerMaxBodyLen(t, 64)
	s, _ := newFake(t)
	runs := 0
	body := strings.Repeat("z", 100)
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(body))
	}))
	do := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "body-len-1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := do(); rec.Code != http.StatusCreated || rec.Body.String() != body {
		t.Fatalf("first request = %d %q, want 201 and the handler's body", rec.Code, rec.Body)
	}
	if rec := do(); rec.Code != http.StatusGone {
		t.Errorf("retry = %d %q, want 410 (completed, not replayable)", rec.Code, rec.Body)
	}
	if runs != 1 {
		t.Errorf("handler ran %d times, want 1", runs)
	}
}

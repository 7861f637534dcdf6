package memstore_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return s
	}, storetest.Watching)
}

// TestConformanceAtSmallBounds runs the suite on a store with bounds far
// below the defaults but above what the suite holds: the accounting must
// not get in the way of the contract.
func TestConformanceAtSmallBounds(t *testing.T) {
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s := memstore.New(memstore.WithMaxEntries(200), memstore.WithMaxBytes(4<<20))
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestNilOptionIgnored(t *testing.T) {
	s := memstore.New(nil, memstore.WithCleanupInterval(0), nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFullStoreThroughMiddleware: a store at its bound makes the Middleware
// answer a new key with 503 ProblemStoreUnavailable and Retry-After, without
// running the handler, while a completed key still replays.
func TestFullStoreThroughMiddleware(t *testing.T) {
	s := memstore.New(memstore.WithMaxEntries(1))
	defer s.Close()
	runs := 0
	h := idempotency.Middleware(s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
	}))
	post := func(key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1}`))
		req.Header.Set(idempotency.HeaderIdempotencyKey, key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := post("first"); w.Code != http.StatusCreated {
		t.Fatalf("first key: %d %s", w.Code, w.Body)
	}
	w := post("second")
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("new key at the bound: %d %s, want 503", w.Code, w.Body)
	}
	var p struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Type != idempotency.ProblemStoreUnavailable {
		t.Errorf("problem type = %q (%v), want %s", p.Type, err, idempotency.ProblemStoreUnavailable)
	}
	if w.Header().Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if runs != 1 {
		t.Errorf("handler ran %d times, want 1 (not for the refused key)", runs)
	}
	if w := post("first"); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay at the bound: %d replayed=%q", w.Code, w.Header().Get("Idempotent-Replayed"))
	}
}

// TestReplaysShareTheResponse: the refused Claims of a completed key, the
// replays, get the store's one read-only Response, not a copy each; Get
// still returns a copy of its own.
func TestReplaysShareTheResponse(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := t.Context()
	k := idempotency.Key{Key: "k"}
	r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
	if err != nil || !r.Acquired {
		t.Fatalf("Claim: %+v, %v", r, err)
	}
	resp := idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":1}`)}
	if err := s.Complete(ctx, k, r.Token, resp, time.Hour); err != nil {
		t.Fatal(err)
	}
	var replays [2]*idempotency.Response
	for i := range replays {
		r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
		if err != nil || r.Acquired || r.Entry.Response == nil {
			t.Fatalf("replay %d: %+v, %v", i, r, err)
		}
		replays[i] = r.Entry.Response
	}
	if replays[0] != replays[1] {
		t.Error("each replay got a copy of the response")
	}
	if got := replays[0]; got.Status != 201 || string(got.Body) != `{"id":1}` || got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("replayed %+v; want the completed response", got)
	}
	e, found, err := s.Get(ctx, k)
	if err != nil || !found || e.Response == replays[0] {
		t.Errorf("Get = %p, %v, %v; want a copy of its own", e.Response, found, err)
	}
}

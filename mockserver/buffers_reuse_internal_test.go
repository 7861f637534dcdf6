package mockserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestPooledBuffersNotKept pays concurrently through the server's handler
// with recipients of many lengths, so that the pooled body and answer
// buffers go from request to request, then checks that no payment, stored
// answer (replayed) or fingerprint (the same body is a replay, not a
// reuse of the key) saw another request's bytes. Run it with -race.
func TestPooledBuffersNotKept(t *testing.T) {
	s := New(WithBalance("EUR", 1<<62))
	defer s.Close()
	h := s.ts.Config.Handler
	post := func(key, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	const n = 400
	type result struct{ key, body, recipient, answer string }
	results := make([]result, n)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < n; i += 4 {
				rcp := fmt.Sprintf("r%03d-", i) + strings.Repeat(string(rune('a'+i%26)), (i*37)%3000)
				body := fmt.Sprintf(`{"amount":%d,"currency":"EUR","recipient":%q}`, i+1, rcp)
				key := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
				w := post(key, body)
				if w.Code != http.StatusCreated {
					t.Errorf("POST %d: %d %s", i, w.Code, w.Body)
					return
				}
				results[i] = result{key, body, rcp, w.Body.String()}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, r := range results {
		var p Payment
		if err := json.Unmarshal([]byte(r.answer), &p); err != nil || p.Recipient != r.recipient || p.Amount != int64(i+1) {
			t.Fatalf("answer %d = %.100q (%v), want recipient %.40q", i, r.answer, err, r.recipient)
		}
	}
	// Replays, concurrently with fresh payments that reuse the buffers.
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < n; i += 4 {
				r := results[i]
				if w := post(r.key, r.body); w.Code != http.StatusCreated || w.Body.String() != r.answer ||
					w.Header().Get(idempotency.HeaderReplayed) != "true" {
					t.Errorf("replay %d: %d %v %.100q, want %.100q", i, w.Code, w.Header(), w.Body, r.answer)
				}
				if w := post(r.key, strings.Replace(r.body, "EUR", "USD", 1)); w.Code != http.StatusUnprocessableEntity {
					t.Errorf("key %d reused with another body: %d %.100q, want 422", i, w.Code, w.Body)
				}
				fresh := fmt.Sprintf(`{"amount":1,"currency":"EUR","recipient":%q}`, strings.Repeat("z", (i*53)%3000+1))
				if w := post(fmt.Sprintf("00000000-0000-4000-9000-%012d", i), fresh); w.Code != http.StatusCreated {
					t.Errorf("fresh %d: %d %s", i, w.Code, w.Body)
				}
			}
		})
	}
	wg.Wait()
	ps, err := s.ledger.Payments(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]Payment{}
	for _, p := range ps {
		byKey[p.IdempotencyKey] = p
	}
	for i, r := range results {
		if p := byKey[r.key]; p.Recipient != r.recipient || p.Amount != int64(i+1) || p.Currency != "EUR" {
			t.Errorf("ledger payment %d = %+v, want recipient %.40q", i, p, r.recipient)
		}
	}
}

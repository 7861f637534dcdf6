package pgledger_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// TestRecipientWithNULIsRefused: PostgreSQL's text cannot hold U+0000, so
// pgledger could never record a payment whose recipient has one; it was
// answered 503 ProblemLedgerUnavailable ("a retry with the same key runs
// the payment") on every retry, for ever, while the memory and Redis
// ledgers paid it. The server now refuses such a recipient itself, with the
// same final 400 ProblemValidation over every ledger, stored and replayed
// like any 400, and nothing is paid.
func TestRecipientWithNULIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(t *testing.T) ([]mockserver.Option, mockserver.Ledger)
	}{
		{"memory", func(*testing.T) ([]mockserver.Option, mockserver.Ledger) {
			l := mockserver.NewMemoryLedger(nil)
			return []mockserver.Option{mockserver.WithLedger(l)}, l
		}},
		{"pgledger lease mode", func(t *testing.T) ([]mockserver.Option, mockserver.Ledger) {
			pool := newPool(t)
			l := pgledger.New(pool, newTable(t, pool), nil)
			return []mockserver.Option{mockserver.WithLedger(l)}, l
		}},
		{"pgledger tx mode", func(t *testing.T) ([]mockserver.Option, mockserver.Ledger) {
			st, l, _ := newTxStore(t, newPool(t), nil)
			return []mockserver.Option{mockserver.WithStore(st), mockserver.WithLedger(l)}, l
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, ledger := tc.opts(t)
			srv := mockserver.New(append(opts, mockserver.WithNamespace(testenv.RandomName("ns")))...)
			defer srv.Close()
			for attempt := 1; attempt <= 2; attempt++ {
				req, _ := http.NewRequest("POST", srv.URL+"/payments",
					strings.NewReader(`{"amount":10,"currency":"EUR","recipient":"ali\u0000ce"}`))
				req.Header.Set("Idempotency-Key", "nul-1")
				req.Header.Set("Content-Type", "application/json")
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var p struct {
					Type   string
					Errors []mockserver.FieldError
				}
				_ = json.Unmarshal(b, &p)
				if resp.StatusCode != http.StatusBadRequest || p.Type != mockserver.ProblemValidation ||
					len(p.Errors) != 1 || p.Errors[0].Field != "recipient" {
					t.Errorf("attempt %d: %d %s, want 400 %s on the recipient", attempt, resp.StatusCode, b, mockserver.ProblemValidation)
				}
				if replayed := resp.Header.Get("Idempotent-Replayed") == "true"; replayed != (attempt > 1) {
					t.Errorf("attempt %d: Idempotent-Replayed %v: the 400 is final and stored, so only the retry replays it", attempt, replayed)
				}
			}
			if ps, err := ledger.Payments(ctxT(t)); err != nil || len(ps) != 0 {
				t.Errorf("ledger payments %v (%v), want none", ps, err)
			}
		})
	}
}

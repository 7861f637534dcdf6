package mockserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// postPayment sends body under key to h and returns the answer.
func postPayment(h http.Handler, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// wantMarshalled fails t unless w answered 201 with p as json.Marshal
// writes it.
func wantMarshalled(t *testing.T, w *httptest.ResponseRecorder, p Payment) {
	t.Helper()
	want, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusCreated || w.Body.String() != string(want)+"\n" || w.Header().Get("Location") != "/payments/"+p.ID {
		t.Errorf("answer %d %q (Location %q), want 201 %s", w.Code, w.Body, w.Header().Get("Location"), want)
	}
}

// TestPaymentAnswerEscapesClientStrings: the strings of the answer that the
// client chose, the recipient and the idempotency key, are escaped as
// json.Marshal escapes them.
func TestPaymentAnswerEscapesClientStrings(t *testing.T) {
	s := New(WithBalance("EUR", 1<<62))
	defer s.Close()
	h := s.ts.Config.Handler
	for _, tc := range []struct{ key, recipient, wantKey string }{
		{"plain-1", `a<b>&c`, "plain-1"},
		{"plain-2", `say \"hi\"`, "plain-2"},
		{"plain-3", `back\\slash`, "plain-3"},
		{"plain-4", "line\u2028sep\u2029", "plain-4"},
		{"plain-5", `Jos\u00e9 \u0001`, "plain-5"},
		{`"k<1>&\"q\\"`, "alice", `k<1>&"q\`},
		{`k<2>&`, "bob", `k<2>&`},
		{`"k\\3"`, `<\"&`, `k\3`},
	} {
		w := postPayment(h, tc.key, `{"amount":1,"currency":"eur","recipient":"`+tc.recipient+`"}`)
		var got Payment
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatalf("key %s: answer %d %q: %v", tc.key, w.Code, w.Body, err)
		}
		p, ok, err := s.ledger.Payment(context.Background(), got.ID)
		if err != nil || !ok {
			t.Fatalf("key %s: payment %s not in the ledger (%v)", tc.key, got.ID, err)
		}
		if p.IdempotencyKey != tc.wantKey {
			t.Errorf("key %s: idempotency key %q, want %q", tc.key, p.IdempotencyKey, tc.wantKey)
		}
		wantMarshalled(t, w, p)
	}
}

// oddLedger answers every Pay with its payment, found or not, whatever it
// is given: a shared ledger's payment made by another server, or a ledger
// that changes what it records.
type oddLedger struct {
	Ledger
	p     Payment
	found bool
}

func (l *oddLedger) Pay(context.Context, string, time.Duration, Payment) (Payment, bool, error) {
	return l.p, l.found, nil
}

// TestPaymentAnswerEscapesLedgerStrings: the answer escapes every string of
// the payment the ledger returns, the ID, currency, status and ref
// included, found or not.
func TestPaymentAnswerEscapesLedgerStrings(t *testing.T) {
	usual := Payment{ID: "pay_0123456789abcdef", Amount: 7, Currency: "EUR", Recipient: "alice", Status: "succeeded",
		IdempotencyKey: "k", Ref: "0b0e7a0e-8d2c-8f37-9a55-5d4c7e6f1a20", Created: time.Date(2026, 12, 1, 10, 4, 5, 123e6, time.UTC)}
	for _, odd := range []string{"<", "&x", `"`, `\`, "\u2028", "é", "\x7f"} {
		for i := range 6 {
			for _, found := range []bool{false, true} {
				p := usual
				*[...]*string{&p.ID, &p.Currency, &p.Recipient, &p.Status, &p.IdempotencyKey, &p.Ref}[i] += odd
				l := &oddLedger{Ledger: NewMemoryLedger(nil), p: p, found: found}
				s := New(WithLedger(l))
				wantMarshalled(t, postPayment(s.ts.Config.Handler, "k", `{"amount":7,"currency":"EUR","recipient":"alice"}`), p)
				s.Close()
			}
		}
	}
}

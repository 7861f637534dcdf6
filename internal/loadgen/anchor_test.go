package loadgen

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPaymentAnchor(t *testing.T) {
	body := strings.NewReader(`{"amount":1,"currency":"EUR","recipient":"acct_1"}` + strings.Repeat(" ", 2000))
	req := httptest.NewRequest(http.MethodPost, "/payments", body)
	req.Header.Set("Idempotency-Key", "k-1")
	w := httptest.NewRecorder()
	PaymentAnchor(w, req)
	if w.Code != http.StatusCreated || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("answer %d %q, want 201 application/json", w.Code, w.Header().Get("Content-Type"))
	}
	if !strings.Contains(w.Body.String(), `"idempotency_key":"k-1"}`) {
		t.Errorf("body %q does not echo the key", w.Body)
	}
	if body.Len() != 0 {
		t.Errorf("%d bytes of the request body left unread", body.Len())
	}
}

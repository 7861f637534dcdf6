package mockserver_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/mockserver"
)

// TestPaymentBodyByteOrderMark: a UTF-8 byte order mark before a payment
// body's JSON is ignored, as the admin API ignores one
// (TestAdminBodyByteOrderMark) and RFC 8259 (section 8.1) lets a parser
// do: it cannot change what the body says. It was refused with a 400
// saying "invalid character 'ï'". The same key and body replay the
// answer. A mark anywhere else, or two, is no JSON, and is refused.
func TestPaymentBodyByteOrderMark(t *testing.T) {
	const bom = "\ufeff"
	srv := mockserver.New()
	defer srv.Close()
	resp, b := mustSend(t, srv, http.MethodPost, "/payments", "bom", bom+payBody)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a payment after a byte order mark: %d %s, want 201", resp.StatusCode, b)
	}
	if p := decodeJSON[mockserver.Payment](t, b); p.Amount != 1250 || p.Currency != "EUR" || p.Recipient != "alice" {
		t.Errorf("payment %+v, want 1250 EUR to alice", p)
	}
	if resp, b := mustSend(t, srv, http.MethodPost, "/payments", "bom", bom+payBody); resp.StatusCode != http.StatusCreated ||
		resp.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("the same key and body again: %d (%s %q) %s, want the replayed 201", resp.StatusCode,
			idempotency.HeaderReplayed, resp.Header.Get(idempotency.HeaderReplayed), b)
	}
	for i, body := range []string{" " + bom + payBody, bom + bom + payBody, payBody + bom, "\n" + bom + payBody} {
		resp, b := mustSend(t, srv, http.MethodPost, "/payments", "bom-elsewhere-"+strconv.Itoa(i), body)
		wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemValidation)
	}
	if n := len(srv.Payments()); n != 1 {
		t.Errorf("%d payments, want 1", n)
	}
}

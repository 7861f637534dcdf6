package mockserver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestPaymentBodyNotUTF8Refused: a payment body that is not UTF-8 (a
// recipient sent in ISO-8859-1, a stray byte in a member the server
// ignores) is refused with a 400 saying so and where, and pays nothing.
// JSON is UTF-8 (RFC 8259, section 8.1); the server read such a body as
// encoding/json does, with U+FFFD in place of each bad byte, and paid
// "Jos\uFFFD" where the client meant "José".
func TestPaymentBodyNotUTF8Refused(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for i, body := range []string{
		"{\"amount\":1,\"currency\":\"EUR\",\"recipient\":\"Jos\xe9\"}",
		"{\"amount\":1,\"currency\":\"EUR\",\"recipient\":\"Jos\\u00e9\",\"memo\":\"\xff\"}",
		"{\"amount\":1,\"currency\":\"EUR\",\"recipient\":\"a\",\"m\xc3\":1}",
		"{\"amount\":1,\"currency\":\"EUR\",\"recipient\":\"\xed\xa0\x80\"}", // a surrogate, encoded
	} {
		resp, b := mustSend(t, srv, http.MethodPost, "/payments", "latin1-"+strconv.Itoa(i), body)
		p := wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemValidation)
		if len(p.Errors) != 1 || p.Errors[0].Field != "" || !strings.Contains(p.Errors[0].Detail, "UTF-8") {
			t.Errorf("body %q: errors %+v, want one for the body saying it is not UTF-8", body, p.Errors)
		}
	}
	if ps := srv.Payments(); len(ps) != 0 {
		t.Errorf("payments %+v, want none", ps)
	}
	// UTF-8, escaped or not, is taken as it is.
	resp, b := mustSend(t, srv, http.MethodPost, "/payments", "utf8", `{"amount":1,"currency":"EUR","recipient":"José \u00e9"}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a UTF-8 body: %d %s", resp.StatusCode, b)
	}
	if p := decodeJSON[mockserver.Payment](t, b); p.Recipient != "José é" {
		t.Errorf("recipient %q, want %q", p.Recipient, "José é")
	}
}

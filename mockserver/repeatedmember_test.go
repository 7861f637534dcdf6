package mockserver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestRepeatedPaymentMemberRefused: a payment body that gives a member
// more than once is refused with a 400 naming the member, and pays
// nothing. encoding/json keeps the last of repeated members and other
// parsers the first, so a client could log a payment of 1 that the server
// made of 2. Bodies the fast scanner takes and bodies only encoding/json
// takes (an escape, a nested member) alike. A member the server ignores
// is refused too when repeated, as a known one is (it was taken): the
// body is no I-JSON (RFC 7493), and what a gateway or the client's own
// log reads from it is not known. Repeated members of a nested object
// are not the payment's, and names of ignored members differing in case
// are two names (a known member's name in another case is refused: see
// TestCaseVariantPaymentMemberRefused).
func TestRepeatedPaymentMemberRefused(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for i, tc := range []struct{ body, field string }{
		{`{"amount":1,"amount":2,"currency":"EUR","recipient":"a"}`, "amount"},
		{`{"amount":1,"currency":"EUR","recipient":"a","amount":1}`, "amount"},
		{`{"amount":1,"currency":"EUR","currency":"USD","recipient":"a"}`, "currency"},
		{`{"amount":1,"currency":"EUR","recipient":"a","recipient":"b"}`, "recipient"},
		{`{"amount":1,"currency":"EUR","recipient":"a","recipient":null}`, "recipient"},
		// encoding/json's path: a key written with an escape, a nested
		// member, an escape in a value.
		{`{"amount":1,"amou\u006et":2,"currency":"EUR","recipient":"a"}`, "amount"},
		{`{"memo":{"x":1},"amount":1,"currency":"EUR","recipient":"a","amount":2}`, "amount"},
		{`{"amount":1,"currency":"EUR","recipient":"\u0061","recipient":"b"}`, "recipient"},
		// A member the server ignores, by the scanner and by encoding/json.
		{`{"amount":1,"currency":"EUR","recipient":"a","memo":"x","memo":"y"}`, "memo"},
		{`{"memo":1,"amount":1,"currency":"EUR","recipient":"a","memo":1}`, "memo"},
		{`{"amount":1,"currency":"EUR","recipient":"a","memo":{"x":1},"memo":null}`, "memo"},
		{`{"amount":1,"currency":"EUR","recipient":"a","me\u006do":1,"memo":2}`, "memo"},
		{`{"amount":1,"currency":"EUR","recipient":"a","":1,"":2}`, ""},
	} {
		resp, b := mustSend(t, srv, http.MethodPost, "/payments", "repeat-"+strconv.Itoa(i), tc.body)
		p := wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemValidation)
		if len(p.Errors) != 1 || p.Errors[0].Field != tc.field || !strings.Contains(p.Errors[0].Detail, "given more than once") {
			t.Errorf("body %s: errors %+v, want one for %s saying it is given more than once", tc.body, p.Errors, tc.field)
		}
	}
	if ps := srv.Payments(); len(ps) != 0 {
		t.Errorf("payments %+v after bodies refused, want none", ps)
	}

	for i, body := range []string{
		`{"amount":1,"currency":"EUR","recipient":"a","memo":"x","Memo":"y"}`,
		`{"amount":1,"currency":"EUR","recipient":"a","memo":{"amount":1,"amount":2}}`,
	} {
		resp, b := mustSend(t, srv, http.MethodPost, "/payments", "ignored-"+strconv.Itoa(i), body)
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("body %s: status %d, want 201; body %s", body, resp.StatusCode, b)
		}
	}
}

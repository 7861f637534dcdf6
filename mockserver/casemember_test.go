package mockserver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestCaseVariantPaymentMemberRefused: a payment body with a member whose
// name is amount, currency or recipient in another case ("Amount") is
// refused with a 400 naming that member, and pays nothing, whether the
// name spelled exactly is there too or not. A case-insensitive decoder
// (encoding/json into a struct, .NET's by default) reads
// {"amount":1,...,"Amount":1000} as a payment of 1000, which the server
// would have made of 1. Bodies the fast scanner takes and bodies only
// encoding/json takes (an escape, a nested value) alike. A member the
// server does not know keeps its name as given: "memo" and "Memo" are two
// ignored members.
func TestCaseVariantPaymentMemberRefused(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for i, tc := range []struct {
		body   string
		fields []string // the errors' fields, in order
	}{
		{`{"amount":1,"currency":"EUR","recipient":"x","Amount":1000}`, []string{"Amount"}},
		{`{"Amount":1000,"amount":1,"currency":"EUR","recipient":"x"}`, []string{"Amount"}},
		{`{"Amount":1000,"currency":"EUR","recipient":"x"}`, []string{"Amount"}},
		{`{"amount":1,"CURRENCY":"USD","currency":"EUR","recipient":"x"}`, []string{"CURRENCY"}},
		{`{"amount":1,"currency":"EUR","recipient":"x","Recipient":"y"}`, []string{"Recipient"}},
		{`{"aMoUnT":1,"Currency":"EUR","recipienT":"x"}`, []string{"aMoUnT", "Currency", "recipienT"}},
		// Two variants of one member, each named once, after the
		// member's own error, before a repeated ignored member.
		{`{"memo":1,"AMOUNT":2,"amount":0,"Amount":3,"AMOUNT":4,"currency":"EUR","recipient":"x","memo":2}`,
			[]string{"amount", "AMOUNT", "Amount", "memo"}},
		// encoding/json's path: an escape in the name or in a value, a
		// nested value.
		{`{"amount":1,"currency":"EUR","recipient":"x","\u0041mount":1000}`, []string{"Amount"}},
		{`{"amount":1,"currency":"EUR","recipient":"\u0078","AMOUNT":1000}`, []string{"AMOUNT"}},
		{`{"memo":{"a":[1]},"amount":1,"currency":"EUR","recipient":"x","Amount":1000}`, []string{"Amount"}},
	} {
		resp, b := mustSend(t, srv, http.MethodPost, "/payments", "case-"+strconv.Itoa(i), tc.body)
		p := wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemValidation)
		var fields []string
		for _, e := range p.Errors {
			fields = append(fields, e.Field)
			if known := strings.ToLower(e.Field); known != e.Field && !strings.Contains(e.Detail, `did you mean "`+known+`"?`) {
				t.Errorf("body %s: the detail of %q is %q, want one asking whether it means %q", tc.body, e.Field, e.Detail, known)
			}
		}
		if strings.Join(fields, ",") != strings.Join(tc.fields, ",") {
			t.Errorf("body %s: errors %+v, want them for %q", tc.body, p.Errors, tc.fields)
		}
	}
	if ps := srv.Payments(); len(ps) != 0 {
		t.Errorf("payments %+v after bodies refused, want none", ps)
	}

	for i, body := range []string{
		`{"amount":1,"currency":"EUR","recipient":"a","memo":"x","Memo":"y"}`,
		`{"amount":1,"currency":"EUR","recipient":"a","memo":{"Amount":2}}`,
		`{"amount":1,"currency":"EUR","recipient":"a","amounts":2,"Amoun":3,"amount ":4}`,
	} {
		resp, b := mustSend(t, srv, http.MethodPost, "/payments", "case-ok-"+strconv.Itoa(i), body)
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("body %s: status %d, want 201; body %s", body, resp.StatusCode, b)
		}
	}
}

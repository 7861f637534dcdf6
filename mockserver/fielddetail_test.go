package mockserver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestFieldDetailFollowsItsField: the problem's detail names each bad
// field followed by its FieldError.Detail ("amount must be greater than
// 0"), so every Detail of a named field is the rest of a sentence about
// it, "is ..." or "must ...". A member named as amount in another case
// read "Amount did you mean "amount"? member names are ...".
func TestFieldDetailFollowsItsField(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for i, body := range []string{
		`{"amount":1,"currency":"EUR","recipient":"x","Amount":1000}`,
		`{"aMoUnT":1,"Currency":"EUR","recipienT":"x"}`,
		`{"amount":1,"currency":"EUR","recipient":"\u0078","AMOUNT":1000}`, // encoding/json's path
		`{"amount":0,"currency":"EURO","recipient":""}`,
		`{"amount":1,"amount":2,"currency":"EUR"}`,
	} {
		resp, b := mustSend(t, srv, http.MethodPost, "/payments", "field-detail-"+strconv.Itoa(i), body)
		p := wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemValidation)
		if len(p.Errors) == 0 {
			t.Errorf("body %s: no errors listed", body)
		}
		for _, e := range p.Errors {
			if e.Field != "" && !strings.HasPrefix(e.Detail, "is ") && !strings.HasPrefix(e.Detail, "must ") {
				t.Errorf("body %s: field %q has detail %q, which does not follow its name in the problem's detail; answer %s", body, e.Field, e.Detail, b)
			}
		}
	}
}

package mockserver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestAmountDetailSaysWhatIsWrong: an amount that is refused is refused
// with a detail that says why, for the client's developer to read. An
// integer past int64 was told that it "must be an integer", which it is,
// and 1250.0, an integer by JSON Schema (the OpenAPI document's "type":
// "integer" takes it), got the same words.
func TestAmountDetailSaysWhatIsWrong(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for i, tc := range []struct{ amount, want string }{
		{"9223372036854775808", "at most 9223372036854775807"},
		{"99999999999999999999", "at most 9223372036854775807"},
		{"-9223372036854775809", "greater than 0"},
		{"-99999999999999999999", "greater than 0"},
		{"1250.0", "without a fraction or exponent"},
		{"1.25e3", "without a fraction or exponent"},
		{"1e30", "without a fraction or exponent"},
		{`"1250"`, "must be a JSON number"},
		// The same through encoding/json: an escape elsewhere in the body
		// takes it off the fast path.
		{`99999999999999999999,"memo":"\u0041"`, "at most 9223372036854775807"},
		{`-99999999999999999999,"memo":"\u0041"`, "greater than 0"},
		{`1250.0,"memo":"\u0041"`, "without a fraction or exponent"},
		{`"1250","memo":"\u0041"`, "must be a JSON number"},
	} {
		body := `{"amount":` + tc.amount + `,"currency":"EUR","recipient":"alice"}`
		resp, b := mustSend(t, srv, http.MethodPost, "/payments", "amount-"+strconv.Itoa(i), body)
		p := wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemValidation)
		if len(p.Errors) != 1 || p.Errors[0].Field != "amount" || !strings.Contains(p.Errors[0].Detail, tc.want) {
			t.Errorf("amount %s: errors %+v, want one for amount saying %q", tc.amount, p.Errors, tc.want)
		}
	}
}

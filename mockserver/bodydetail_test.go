package mockserver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestMalformedBodyDetailSaysWhere: a payment body that is not valid JSON
// is told so, with what and where, rather than that it "must be a JSON
// object" (which a body cut short, or one nested deeper than the parser
// goes, is, or meant to be); a body of valid JSON that is no object is
// still told that it must be one.
func TestMalformedBodyDetailSaysWhere(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	deep := `{"amount":1,"currency":"EUR","recipient":"a","memo":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`
	for i, tc := range []struct{ body, want string }{
		{`{"amount":1,"currency":"EUR",`, "not valid JSON: unexpected end of JSON input"},
		{`{amount:1}`, "not valid JSON: invalid character 'a' looking for beginning of object key string (after 2 bytes)"},
		{deep, "exceeded max depth"},
		{`[1]`, "body must be a JSON object"},
		{`null`, "body must be a JSON object"},
		{`{"amount":1} {}`, "body must be a single JSON object"},
	} {
		resp, b := mustSend(t, srv, http.MethodPost, "/payments", "body-"+strconv.Itoa(i), tc.body)
		p := wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemValidation)
		if len(p.Errors) != 1 || p.Errors[0].Field != "" || !strings.Contains(p.Errors[0].Detail, tc.want) {
			t.Errorf("body %.40q: errors %+v, want one for the body saying %q", tc.body, p.Errors, tc.want)
		}
	}
}

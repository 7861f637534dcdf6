package mockserver_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestRecipientDetailSaysWhatIsWrong: a recipient of white space alone is
// refused, as the package doc says ("a non-blank string"), with a detail
// that says so. It was told that it "must be a non-empty string", which it
// is, so the client's developer was left to guess.
func TestRecipientDetailSaysWhatIsWrong(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for i, recipient := range []string{
		`"   "`,
		`"\t"`,
		`""`,
		`" \u0020 "`, // an escape: through encoding/json, off the fast path
		`5`,
	} {
		body := `{"amount":1250,"currency":"EUR","recipient":` + recipient + `}`
		resp, b := mustSend(t, srv, http.MethodPost, "/payments", "recipient-"+strconv.Itoa(i), body)
		p := wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemValidation)
		if len(p.Errors) != 1 || p.Errors[0].Field != "recipient" {
			t.Errorf("recipient %s: errors %+v, want one for recipient", recipient, p.Errors)
			continue
		}
		if d := p.Errors[0].Detail; !strings.Contains(d, "blank") || strings.Contains(d, "non-empty") {
			t.Errorf("recipient %s: detail %q, want one that says it must not be blank (and does not ask for what it has: a non-empty string)", recipient, d)
		}
	}
}

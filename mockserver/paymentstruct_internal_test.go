package mockserver

import (
	"encoding/json"
	"strings"
	"testing"
)

// structAgrees checks that a payment parsePaymentRequest accepts from body
// is the one a case-insensitive decoder reads from it: encoding/json into
// a struct, which matches member names to fields without regard to case
// and takes the last match.
func structAgrees(t *testing.T, body []byte) {
	t.Helper()
	req, errs := parsePaymentRequest(body)
	if len(errs) > 0 {
		return
	}
	var s struct {
		Amount    int64  `json:"amount"`
		Currency  string `json:"currency"`
		Recipient string `json:"recipient"`
	}
	if err := json.Unmarshal(jsonText(body), &s); err != nil {
		t.Errorf("body %q: accepted as %+v, but encoding/json cannot decode it into a struct: %v", body, req, err)
		return
	}
	if s.Amount != req.Amount || strings.ToUpper(s.Currency) != req.Currency || s.Recipient != req.Recipient {
		t.Errorf("body %q: accepted as %+v, but encoding/json decodes it into a struct as %+v", body, req, s)
	}
}

// TestAcceptedPaymentsAgreeWithStructDecoder holds every payment that
// parsePaymentRequest accepts from the test bodies to the one
// encoding/json decodes into a struct, whose member names match without
// regard to case.
func TestAcceptedPaymentsAgreeWithStructDecoder(t *testing.T) {
	bodies := edgeBodies()
	for _, tt := range append(paymentRequestTests[:len(paymentRequestTests):len(paymentRequestTests)], parserOnlyTests...) {
		bodies = append(bodies, tt.body)
	}
	usual := `"amount":1250,"currency":"EUR","recipient":"alice"`
	for _, name := range []string{"Amount", "AMOUNT", "amounT", "Currency", "CURRENCY", "Recipient", "RECIPIENT", `\u0041mount`, `Recipien\u0054`} {
		bodies = append(bodies,
			`{`+usual+`,"`+name+`":1}`, `{"`+name+`":1,`+usual+`}`,
			`{`+usual+`,"`+name+`":"x"}`, `{"`+name+`":"xyz",`+usual+`}`)
	}
	var accepted int
	for _, body := range bodies {
		if _, errs := parsePaymentRequest([]byte(body)); len(errs) == 0 {
			accepted++
		}
		structAgrees(t, []byte(body))
	}
	t.Logf("%d bodies, %d accepted", len(bodies), accepted)
}

package mockserver

import (
	"strings"
	"testing"
)

// paymentRequestTests are TestParsePaymentRequest's cases;
// TestOpenAPIPaymentRequest runs them too.
var paymentRequestTests = []struct {
	name       string
	body       string
	want       paymentRequest
	wantFields []string // the fields named by the errors, in order
}{
	{name: "valid", body: `{"amount":1250,"currency":"EUR","recipient":"alice"}`,
		want: paymentRequest{Amount: 1250, Currency: "EUR", Recipient: "alice"}},
	{name: "lower-case currency is normalised", body: `{"amount":1,"currency":"usd","recipient":"bob"}`,
		want: paymentRequest{Amount: 1, Currency: "USD", Recipient: "bob"}},
	{name: "extra members are ignored", body: `{"amount":5,"currency":"GBP","recipient":"c","memo":"x"}`,
		want: paymentRequest{Amount: 5, Currency: "GBP", Recipient: "c"}},
	{name: "empty object", body: `{}`, wantFields: []string{"amount", "currency", "recipient"}},
	{name: "zero amount", body: `{"amount":0,"currency":"EUR","recipient":"a"}`, wantFields: []string{"amount"}},
	{name: "negative amount", body: `{"amount":-3,"currency":"EUR","recipient":"a"}`, wantFields: []string{"amount"}},
	{name: "fractional amount", body: `{"amount":10.5,"currency":"EUR","recipient":"a"}`, wantFields: []string{"amount"}},
	{name: "string amount", body: `{"amount":"10","currency":"EUR","recipient":"a"}`, wantFields: []string{"amount"}},
	{name: "amount overflows int64", body: `{"amount":99999999999999999999,"currency":"EUR","recipient":"a"}`, wantFields: []string{"amount"}},
	{name: "two-letter currency", body: `{"amount":1,"currency":"EU","recipient":"a"}`, wantFields: []string{"currency"}},
	{name: "currency with digit", body: `{"amount":1,"currency":"EU1","recipient":"a"}`, wantFields: []string{"currency"}},
	{name: "currency not a string", body: `{"amount":1,"currency":978,"recipient":"a"}`, wantFields: []string{"currency"}},
	{name: "blank recipient", body: `{"amount":1,"currency":"EUR","recipient":"  "}`, wantFields: []string{"recipient"}},
	{name: "null recipient", body: `{"amount":1,"currency":"EUR","recipient":null}`, wantFields: []string{"recipient"}},
	{name: "recipient with U+0000", body: `{"amount":1,"currency":"EUR","recipient":"ali\u0000ce"}`, wantFields: []string{"recipient"}},
	{name: "recipient of U+0000 alone", body: `{"amount":1,"currency":"EUR","recipient":"\u0000"}`, wantFields: []string{"recipient"}},
	{name: "all wrong", body: `{"amount":0,"currency":"E","recipient":""}`, wantFields: []string{"amount", "currency", "recipient"}},
	{name: "not JSON", body: `amount=1`, wantFields: []string{""}},
	{name: "array", body: `[1,2]`, wantFields: []string{""}},
	{name: "null", body: `null`, wantFields: []string{""}},
	{name: "two objects", body: `{"amount":1,"currency":"EUR","recipient":"a"} {}`, wantFields: []string{""}},
	{name: "empty body", body: ``, wantFields: []string{""}},
}

// parserOnlyTests are more of TestParsePaymentRequest's cases, the
// parser's edges that the OpenAPI document does not draw (JSON Schema's
// integer takes 1e3; the validator reads numbers as float64).
var parserOnlyTests = []struct {
	name       string
	body       string
	want       paymentRequest
	wantFields []string
}{
	{name: "amount with an exponent", body: `{"amount":1e3,"currency":"EUR","recipient":"a"}`, wantFields: []string{"amount"}},
	{name: "negative zero amount", body: `{"amount":-0,"currency":"EUR","recipient":"a"}`, wantFields: []string{"amount"}},
	{name: "null amount", body: `{"amount":null,"currency":"EUR","recipient":"a"}`, wantFields: []string{"amount"}},
	{name: "escaped strings are unescaped", body: `{"amount":7,"currency":"\u0065ur","recipient":"al\u0069ce \"b\""}`,
		want: paymentRequest{Amount: 7, Currency: "EUR", Recipient: `alice "b"`}},
	{name: "invalid UTF-8 is refused", body: "{\"amount\":7,\"currency\":\"EUR\",\"recipient\":\"a\xffb\"}", wantFields: []string{""}},
	{name: "max int64 amount", body: `{"amount":9223372036854775807,"currency":"EUR","recipient":"a"}`,
		want: paymentRequest{Amount: 9223372036854775807, Currency: "EUR", Recipient: "a"}},
	// A member given twice is refused, whichever parser reads the body
	// (the OpenAPI validator keeps one of them, as encoding/json does).
	{name: "repeated amount", body: `{"amount":1,"amount":2,"currency":"EUR","recipient":"a"}`, wantFields: []string{"amount"}},
	{name: "repeated amount, the same", body: `{"amount":1,"currency":"EUR","recipient":"a","amount":1}`, wantFields: []string{"amount"}},
	{name: "repeated currency and recipient", body: `{"amount":0,"currency":"EUR","recipient":"a","recipient":"b","currency":"EUR"}`,
		wantFields: []string{"amount", "currency", "recipient"}},
	{name: "repeated amount, escaped", body: `{"amount":1,"am\u006funt":2,"currency":"EUR","recipient":"a"}`, wantFields: []string{"amount"}},
	{name: "repeated recipient, nested member", body: `{"recipient":"a","memo":[{}],"amount":1,"currency":"EUR","recipient":"b"}`,
		wantFields: []string{"recipient"}},
	{name: "repeated ignored member", body: `{"amount":1,"currency":"EUR","recipient":"a","memo":1,"memo":2}`, wantFields: []string{"memo"}},
	// The fields' errors come first, then the other members' in the
	// order they first appear, each once.
	{name: "repeated members, known and ignored", body: `{"b":1,"a":1,"amount":1,"a":2,"currency":"EUR","b":2,"recipient":"a","amount":2,"a":3}`,
		wantFields: []string{"amount", "b", "a"}},
	{name: "repeated ignored members, nested", body: `{"b":[1],"a":{},"amount":1,"a":2,"currency":"EUR","b":2,"recipient":"a"}`,
		wantFields: []string{"b", "a"}},
	{name: "repeated member of a nested object", body: `{"amount":1,"currency":"EUR","recipient":"a","memo":{"amount":1,"amount":2}}`,
		want: paymentRequest{Amount: 1, Currency: "EUR", Recipient: "a"}},
	// A known member's name in another case is refused, with the name
	// spelled exactly or without it (a case-insensitive decoder reads
	// it as the member; the OpenAPI validator ignores it).
	{name: "amount in another case", body: `{"amount":1,"currency":"EUR","recipient":"a","Amount":1000}`, wantFields: []string{"Amount"}},
	{name: "amount in another case alone", body: `{"AMOUNT":1000,"currency":"EUR","recipient":"a"}`, wantFields: []string{"AMOUNT"}},
	{name: "every member in another case", body: `{"Recipient":"a","cUrrency":"EUR","amounT":1}`, wantFields: []string{"amounT", "cUrrency", "Recipient"}},
	{name: "a variant given twice", body: `{"amount":1,"currency":"EUR","recipient":"a","Currency":"X","Currency":"Y"}`, wantFields: []string{"Currency"}},
	{name: "variants after the member's error", body: `{"Amount":1,"a":1,"amount":0,"AMOUNT":1,"currency":"EUR","recipient":"a","a":2}`,
		wantFields: []string{"amount", "Amount", "AMOUNT", "a"}},
	{name: "amount in another case, escaped", body: `{"amount":1,"currency":"EUR","recipient":"a","\u0041mount":1000}`, wantFields: []string{"Amount"}},
	{name: "amount in another case, nested value", body: `{"amount":1,"currency":"EUR","recipient":"a","Amount":{"x":1}}`, wantFields: []string{"Amount"}},
	{name: "ignored members in two cases", body: `{"amount":1,"currency":"EUR","recipient":"a","memo":1,"Memo":2,"amounts":3}`,
		want: paymentRequest{Amount: 1, Currency: "EUR", Recipient: "a"}},
}

func TestParsePaymentRequest(t *testing.T) {
	for _, tt := range append(paymentRequestTests[:len(paymentRequestTests):len(paymentRequestTests)], parserOnlyTests...) {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := parsePaymentRequest([]byte(tt.body))
			var fields []string
			for _, e := range errs {
				fields = append(fields, e.Field)
				if e.Detail == "" {
					t.Errorf("error for field %q has no detail", e.Field)
				}
			}
			if strings.Join(fields, ",") != strings.Join(tt.wantFields, ",") || len(fields) != len(tt.wantFields) {
				t.Fatalf("error fields = %q, want %q (errors %+v)", fields, tt.wantFields, errs)
			}
			if len(errs) == 0 && got != tt.want {
				t.Errorf("request = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParsePaymentRequest(f *testing.F) {
	f.Add([]byte(`{"amount":1250,"currency":"EUR","recipient":"alice"}`))
	f.Add([]byte(`{"amount":0,"currency":"E","recipient":""}`))
	f.Add([]byte(`{"amount":1e3,"currency":"usd","recipient":"x"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"currency":"\u0045UR"}`))
	f.Add([]byte(`{"amount":1,"currency":"EUR","recipient":"x","Amount":1000}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		scanAgrees(t, body)
		structAgrees(t, body)
		req, errs := parsePaymentRequest(body)
		if len(errs) > 0 {
			return
		}
		if req.Amount <= 0 {
			t.Errorf("accepted amount %d", req.Amount)
		}
		if !isCurrency(req.Currency) || strings.ToUpper(req.Currency) != req.Currency {
			t.Errorf("accepted currency %q", req.Currency)
		}
		if strings.TrimSpace(req.Recipient) == "" || strings.ContainsRune(req.Recipient, 0) {
			t.Errorf("accepted recipient %q", req.Recipient)
		}
	})
}

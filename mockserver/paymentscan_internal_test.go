package mockserver

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// scanAgrees checks that scanPaymentRequest, where it takes body, answers
// as decodePaymentRequest does, and reports whether it took it.
func scanAgrees(t *testing.T, body []byte) bool {
	t.Helper()
	req, errs, ok := scanPaymentRequest(body)
	if !ok {
		return false
	}
	wantReq, wantErrs := decodePaymentRequest(body)
	if req != wantReq || !reflect.DeepEqual(errs, wantErrs) {
		t.Errorf("body %q:\nscan   %+v %+v\ndecode %+v %+v", body, req, errs, wantReq, wantErrs)
	}
	return true
}

// TestScanPaymentRequestAgreesWithJSON compares scanPaymentRequest with
// decodePaymentRequest on bodies assembled from members that are valid,
// invalid and almost valid, and on random mutations of them.
func TestScanPaymentRequestAgreesWithJSON(t *testing.T) {
	keys := []string{`"amount"`, `"currency"`, `"recipient"`, `"memo"`, `"Amount"`, `"CURRENCY"`, `"recipienT"`, `"amo\u0075nt"`, `"\u0041mount"`, `"recipient "`, "\"amount\t\"", `""`, `amount`}
	values := []string{
		`0`, `-0`, `1`, `1250`, `01`, `-`, `1.`, `1.5`, `-1.5`, `1e3`, `1E+3`, `1e-3`, `1e`, `.5`, `+1`, `-3`,
		`9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `-9223372036854775809`,
		`99999999999999999999`, `18446744073709551616`, `00`, `0x10`,
		`"EUR"`, `"eur"`, `"uSd"`, `"EU"`, `"EURO"`, `"E1R"`, `"E@R"`, `"E[R"`, `"\u0045UR"`, `"€UR"`, "\"EU\xff\"",
		`"alice"`, `""`, `"  "`, "\"\t\"", `"\n"`, "\"\u00a0\"", "\"\u2003x\"", `"José"`, "\"a\xffb\"", "\"a\x01b\"",
		`"a\"b"`, `"10"`, `"1e3"`, `"\ud800"`, `"<&>"`,
		`null`, `true`, `false`, `nul`, `truex`, `nullnull`, `fals`, `{}`, `[]`, `{"a":1}`, `[1,2]`, `"`, ``,
	}
	spaces := []string{"", " ", "\n\t\r ", "\u00a0", "\f"}
	tails := []string{"", " ", "\n", "x", "}", "]", "{}", " {}", ",", "\x00"}

	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	var bodies []string
	for _, tt := range paymentRequestTests {
		bodies = append(bodies, tt.body)
	}
	for _, tt := range parserOnlyTests {
		bodies = append(bodies, tt.body)
	}
	for range 20000 {
		var b strings.Builder
		b.WriteString(pick(spaces[:3]))
		b.WriteString("{")
		n := rng.IntN(5)
		for m := range n {
			if m > 0 {
				b.WriteString(pick([]string{",", ", ", ",\n", ",,", ""}[:rng.IntN(5)+1]))
			}
			sp := pick(spaces)
			if rng.IntN(4) > 0 {
				sp = pick(spaces[:3])
			}
			key := pick(keys[:3])
			if rng.IntN(3) == 0 {
				key = pick(keys)
			}
			b.WriteString(sp + key + sp + pick([]string{":", ":", " : ", "", "="}) + sp + pick(values) + sp)
		}
		b.WriteString("}")
		if rng.IntN(3) == 0 {
			b.WriteString(pick(tails))
		}
		bodies = append(bodies, b.String())
	}
	valid := `{"amount":1250,"currency":"EUR","recipient":"alice"}`
	for range 20000 {
		b := []byte(valid)
		for range rng.IntN(4) + 1 {
			switch i := rng.IntN(len(b) + 1); rng.IntN(3) {
			case 0:
				b = append(b[:i], append([]byte{byte(rng.IntN(256))}, b[i:]...)...)
			case 1:
				if i < len(b) {
					b = append(b[:i], b[i+1:]...)
				}
			default:
				if i < len(b) {
					const alphabet = "{}[]\",:0123456789-+.eE \\ntfalsru\x00\xff"
					b[i] = alphabet[rng.IntN(len(alphabet))]
				}
			}
		}
		bodies = append(bodies, string(b))
	}

	var scanned, accepted int
	for _, body := range bodies {
		structAgrees(t, []byte(body))
		if scanAgrees(t, []byte(body)) {
			scanned++
			if _, errs, _ := scanPaymentRequest([]byte(body)); len(errs) == 0 {
				accepted++
			}
		}
	}
	t.Logf("%d bodies, %d scanned, %d of them valid payments", len(bodies), scanned, accepted)
	if scanned < len(bodies)/4 || accepted < len(bodies)/100 {
		t.Errorf("only %d of %d bodies scanned, %d valid: the test does not exercise scanPaymentRequest", scanned, len(bodies), accepted)
	}
}

// TestParsePaymentRequestAllocations holds parsePaymentRequest of a usual
// body to the one allocation of its strings, with members it ignores too
// (whose names it compares with the fields' in any case).
func TestParsePaymentRequestAllocations(t *testing.T) {
	for _, body := range []string{
		`{"amount":1250,"currency":"eur","recipient":"alice"}`,
		`{"amount":1250,"currency":"eur","recipient":"alice","memo":"x","amounts":1,"Recipien":2,"Key":3}`,
	} {
		b := []byte(body)
		if n := testing.AllocsPerRun(100, func() { parsePaymentRequest(b) }); n > 1 {
			t.Errorf("parsePaymentRequest of %s allocates %v times, want at most 1", body, n)
		}
	}
}

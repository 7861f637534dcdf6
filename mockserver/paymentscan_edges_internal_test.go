package mockserver

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// reflectPaymentRequest is parsePaymentRequest as it was before any fast
// path: json.Unmarshal of every member, by reflection, of the JSON text.
func reflectPaymentRequest(body []byte) (paymentRequest, []FieldError) {
	body, errs := paymentText(body)
	if errs != nil {
		return paymentRequest{}, errs
	}
	return decodePaymentMembers(body, unmarshalAs[int64], unmarshalAs[string])
}

// unmarshalAs is json.Unmarshal of raw into a T.
func unmarshalAs[T any](raw json.RawMessage) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}

// edgeBodies are the bodies a review of scanPaymentRequest thought of:
// every JSON type and edge number for every field, repeated and
// differently cased members, whitespace JSON has and has not, literals
// almost right, a BOM, trailing data, control characters, invalid UTF-8,
// escapes, long strings.
func edgeBodies() []string {
	values := []string{
		`0`, `-0`, `1`, `01`, `-01`, `00`, `1.0`, `1.5`, `-0.0`, `1e2`, `1E2`, `1e+2`, `1e-2`, `1.0e0`, `0e0`, `-0e0`, `1e400`,
		`9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `-9223372036854775809`,
		`922337203685477580`, `9223372036854775806`, `18446744073709551615`, `18446744073709551616`,
		`92233720368547758070`, `-92233720368547758080`, strings.Repeat("9", 400), "1" + strings.Repeat("0", 18), "1" + strings.Repeat("0", 19),
		`true`, `false`, `null`, `tru`, `nul`, `fals`, `True`, `NULL`, `nulll`, `truee`, `t`, `n`, `f`,
		`"EUR"`, `"eur"`, `"EuR"`, `"EU"`, `"EURO"`, `"E R"`, `"E\u0055R"`, `"\u0000EU"`, "\"EU\x7f\"", "\"E\xc3\x89R\"", "\"\xff\xfe\xfd\"",
		"\"\xed\xa0\x80\"", `"@[\"`, `"[`, "\"`{~\"", `"alice"`, `""`, `" "`, `"\t"`, "\"\u00a0\"", "\"\u0085\"", "\"\u2028\"", "\"\ufeff\"",
		"\"a\x7fb\"", "\"a\xffb\"", "\"a\xed\xa0\x80b\"", "\"a\xf4\x90\x80\x80b\"", "\"a\xc0\xafb\"", "\"\xe2\x80\"",
		"\"a\x00b\"", "\"a\x1fb\"", "\"a\tb\"", "\"a\nb\"", `"a\"b"`, `"a\\b"`, `"a\/b"`, `"\u00e9"`, `"\ud800"`, `"<&>"`,
		`"` + strings.Repeat("x", 70000) + `"`, `"` + strings.Repeat("é", 3000) + `"`, `"10"`, `"1e3"`, `"-1"`,
		`{}`, `[]`, `{"amount":1}`, `[1]`, `"`, ``, `-`, `+1`, `.5`, `1.`, `1e`, `1e+`, `0x1`, `Infinity`, `NaN`,
	}
	keys := []string{`"amount"`, `"currency"`, `"recipient"`, `"Amount"`, `"AMOUNT"`, `"Currency"`, `"RECIPIENT"`, `"aMOUNT"`, `"Recipient"`, `"\u0041mount"`, `"amount "`,
		`"am\u006fount"`, "\"amount\xff\"", `"memo"`, `""`, "\"a\x00\""}
	valid := map[string]string{`"amount"`: `1250`, `"currency"`: `"EUR"`, `"recipient"`: `"alice"`}
	var bodies []string
	obj := func(members ...string) string { return "{" + strings.Join(members, ",") + "}" }
	base := []string{`"amount":1250`, `"currency":"EUR"`, `"recipient":"alice"`}
	for _, k := range keys {
		for _, v := range values {
			m := k + ":" + v
			// The member alone, with the valid ones around it, and repeated
			// before and after a valid one.
			bodies = append(bodies, obj(m), obj(append([]string{m}, base...)...), obj(append(append([]string{}, base...), m)...))
			if vv, ok := valid[k]; ok {
				bodies = append(bodies, obj(k+":"+vv, m), obj(m, k+":"+vv))
			}
		}
	}
	usual := obj(base...)
	for _, sp := range []string{"", " ", "\t", "\n", "\r", "\r\n", " \t\n\r", "\f", "\v", "\u00a0", "\u0085", "\u2028", "\ufeff", "\x00"} {
		bodies = append(bodies,
			sp+usual, usual+sp, sp+usual+sp,
			"{"+sp+strings.Join(base, sp+","+sp)+sp+"}",
			"{"+sp+`"amount"`+sp+":"+sp+`1`+sp+","+`"currency":"EUR","recipient":"a"}`,
			"{"+sp+"}",
		)
	}
	for _, tail := range []string{"x", "{}", "[]", "}", "]", ",", " {}", "null", "1", `""`, "\x00", "/", "//", "\n}", " ]"} {
		bodies = append(bodies, usual+tail, "{}"+tail)
	}
	bodies = append(bodies, "", " ", "{", "}", "{,}", `{"amount":1,}`, `{"amount":1,,"currency":"EUR"}`, `{"amount" 1}`,
		`{"amount":}`, `{"amount"}`, `{"amount":1 "currency":"EUR"}`, `{amount:1}`, `{'amount':1}`, "\xef\xbb\xbf"+usual,
		`[`+usual+`]`, `"`+usual+`"`, `null`, `true`, `1`, `"x"`, `[]`, `{}`, `{ }`, "{\n}", `{"":1}`, `{"":""}`,
		`{"amount":1,"currency":"EUR","recipient":"alice","amount":2}`,
		`{"amount":1,"amount":null}`, `{"amount":null,"amount":1}`, `{"recipient":"\u0061","recipient":"b"}`,
		`{"recipient":"b","recipient":"\u0061"}`, `{"recipient":"`+"\xff"+`","recipient":"b"}`, `{"recipient":"b","recipient":"`+"\xff"+`"}`)
	return bodies
}

// TestScanPaymentRequestEdges holds parsePaymentRequest (the scanner where
// it takes the body) to decodePaymentRequest, and both to the reflection
// parser they replaced, on edgeBodies.
func TestScanPaymentRequestEdges(t *testing.T) {
	var scanned int
	for _, body := range edgeBodies() {
		if scanAgrees(t, []byte(body)) {
			scanned++
		}
		req, errs := parsePaymentRequest([]byte(body))
		wantReq, wantErrs := reflectPaymentRequest([]byte(body))
		if req != wantReq || !reflect.DeepEqual(errs, wantErrs) {
			t.Errorf("body %.200q:\nparse   %+v %+v\nreflect %+v %+v", body, req, errs, wantReq, wantErrs)
		}
	}
	t.Logf("%d bodies, %d scanned", len(edgeBodies()), scanned)
}

// TestScanPaymentRequestRandomMembers compares the scanner with the
// reflection parser on objects of random members drawn from a small
// alphabet of keys and byte-level values, valid JSON or not.
func TestScanPaymentRequestRandomMembers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = "0123456789-+.eE\"\\ \t\n\r\f{}[],:tfnulrsae\x00\x1f\x7f\x80\xbf\xc3\xa9\xed\xff"
	keys := []string{"amount", "currency", "recipient", "Amount", "CURRENCY", "Recipient", "x"}
	var scanned int
	for range 100000 {
		var b []byte
		b = append(b, '{')
		for m := range rng.IntN(5) {
			if m > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, keys[rng.IntN(len(keys))])
			b = append(b, ':')
			switch rng.IntN(4) {
			case 0:
				b = strconv.AppendInt(b, rng.Int64()>>rng.IntN(64)*int64(1-2*rng.IntN(2)), 10)
			case 1:
				b = append(b, '"')
				for range rng.IntN(5) {
					b = append(b, alphabet[rng.IntN(len(alphabet))])
				}
				b = append(b, '"')
			default:
				for range rng.IntN(6) + 1 {
					b = append(b, alphabet[rng.IntN(len(alphabet))])
				}
			}
		}
		b = append(b, '}')
		if _, _, ok := scanPaymentRequest(b); ok {
			scanned++
		}
		structAgrees(t, b)
		req, errs := parsePaymentRequest(b)
		wantReq, wantErrs := reflectPaymentRequest(b)
		if req != wantReq || !reflect.DeepEqual(errs, wantErrs) {
			t.Errorf("body %q:\nparse   %+v %+v\nreflect %+v %+v", b, req, errs, wantReq, wantErrs)
		}
	}
	t.Logf("%d scanned", scanned)
}

// FuzzParsePaymentRequestReflect holds parsePaymentRequest to the
// reflection parser it replaced on any body.
func FuzzParsePaymentRequestReflect(f *testing.F) {
	for i, body := range edgeBodies() {
		if i%16 == 0 && len(body) < 200 {
			f.Add([]byte(body))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, errs := parsePaymentRequest(body)
		wantReq, wantErrs := reflectPaymentRequest(body)
		if req != wantReq || !reflect.DeepEqual(errs, wantErrs) {
			t.Errorf("body %q:\nparse   %+v %+v\nreflect %+v %+v", body, req, errs, wantReq, wantErrs)
		}
		structAgrees(t, body)
	})
}

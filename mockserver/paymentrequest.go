package mockserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// paymentRequest is a validated POST /payments body.
type paymentRequest struct {
	Amount    int64
	Currency  string
	Recipient string
}

// parsePaymentRequest validates a POST /payments body. It returns every
// invalid field at once, so a client fixes its request in one round. It
// refuses a member given more than once, whatever its values: parsers
// differ on which one counts, and a client's could have read the payment
// as another than the server makes. That holds for the members it
// ignores too, which the client, a gateway or a log may read: such a body
// is no I-JSON (RFC 7493, section 2.3). It refuses, too, a member named
// as amount, currency or recipient in another case ("Amount"), whether
// the exact name is given or not: a decoder that ignores case
// (encoding/json into a struct) takes it for that member, and the last
// of them for its value (see caseVariantOf). The members of nested values are
// not the payment's, and are ignored. A
// request it accepts can be stored by every Ledger: its recipient has no
// U+0000, which PostgreSQL's text refuses.
//
// A UTF-8 byte order mark before the JSON is ignored (see jsonText); a
// body that is not UTF-8 is refused (see utf8Refusal).
//
// The bodies clients send are read by scanPaymentRequest, without
// encoding/json; every other body by decodePaymentRequest, which defines
// what parsePaymentRequest answers.
func parsePaymentRequest(body []byte) (paymentRequest, []FieldError) {
	// A body the scan takes whose strings are ASCII is all ASCII, so
	// UTF-8: its check, a pass over every byte, runs for the others only,
	// before their scan's answer or encoding/json's counts.
	body = jsonText(body)
	req, errs, ok, ascii := scanPayment(body)
	if ok && ascii {
		return req, errs
	}
	if errs := utf8Refusal(body); errs != nil {
		return paymentRequest{}, errs
	}
	if ok {
		return req, errs
	}
	return decodePaymentRequest(body)
}

// jsonText returns the JSON text of body, a JSON body of the API: body
// without a UTF-8 byte order mark it starts with. RFC 8259 (section 8.1)
// forbids a sender to add one and lets a parser ignore it; it cannot
// change what the body says, and an editor or a shell that saves UTF-8
// with one (Windows PowerShell's -InFile of such a file) sends it. The
// payments and the admin API ignore it alike. A mark anywhere else is no
// JSON.
func jsonText(body []byte) []byte {
	return bytes.TrimPrefix(body, []byte("\ufeff"))
}

// paymentText returns the JSON text of a payment body (see jsonText), or
// the error of a body that is not UTF-8. JSON is UTF-8 (RFC 8259, section
// 8.1), and encoding/json would read each bad byte as U+FFFD: a recipient
// sent in ISO-8859-1 ("Jos\xe9") would be paid as another ("Jos\ufffd").
// A byte anywhere counts, in a member the server ignores too: the body
// is not the JSON text its sender meant.
func paymentText(body []byte) ([]byte, []FieldError) {
	body = jsonText(body)
	if errs := utf8Refusal(body); errs != nil {
		return nil, errs
	}
	return body, nil
}

// utf8Refusal returns nil for a body that is UTF-8, and the error that
// refuses it, naming its first bad byte, otherwise.
func utf8Refusal(body []byte) []FieldError {
	if utf8.Valid(body) {
		return nil
	}
	i := 0
	for i < len(body) {
		r, n := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && n == 1 {
			break
		}
		i += n
	}
	return []FieldError{{Field: "", Detail: fmt.Sprintf("body is not valid UTF-8, which JSON is (RFC 8259, section 8.1): byte 0x%02X at offset %d", body[i], i)}}
}

// decodePaymentRequest is parsePaymentRequest by encoding/json: it takes
// any body.
func decodePaymentRequest(body []byte) (paymentRequest, []FieldError) {
	return decodePaymentMembers(body, jsonInt, jsonString)
}

// decodePaymentMembers is decodePaymentRequest with the amount decoded by
// intOf and the strings by stringOf, each json.Unmarshal of a valid JSON
// value into its type, or a faster equivalent (jsonInt, jsonString). The
// tests pass json.Unmarshal itself, to hold the faster ones to it.
func decodePaymentMembers(body []byte,
	intOf func(json.RawMessage) (int64, error),
	stringOf func(json.RawMessage) (string, error),
) (paymentRequest, []FieldError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		// Tell a body that is not an object from one with more after it.
		dec := json.NewDecoder(bytes.NewReader(body))
		var v map[string]json.RawMessage
		if dec.Decode(&v) == nil && v != nil && dec.More() {
			return paymentRequest{}, []FieldError{{Field: "", Detail: "body must be a single JSON object"}}
		}
		// Not JSON at all (cut short, a stray character, nested past
		// encoding/json's depth): say what and where, not that it must
		// be the object it likely means to be.
		if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
			return paymentRequest{}, []FieldError{{Field: "",
				Detail: "body is not valid JSON: " + se.Error() + " (after " + strconv.FormatInt(se.Offset, 10) + " bytes)"}}
		}
		return paymentRequest{}, []FieldError{{Field: "", Detail: "body must be a JSON object"}}
	}
	// fields holds the last of a member given more than once.
	var given [len(paymentFields)]int
	var others []string      // the other members, in the order they first appear
	var of []int             // caseVariantOf each of others
	var times map[string]int // how often each of others is given
	var cased [len(paymentFields)]bool
	for name := range memberNames(body) {
		if i := slices.Index(paymentFields[:], name); i >= 0 {
			given[i]++
			continue
		}
		if times == nil {
			times = make(map[string]int)
		}
		if times[name]++; times[name] == 1 {
			others = append(others, name)
			i := caseVariantOf(name)
			of = append(of, i)
			if i >= 0 {
				cased[i] = true
			}
		}
	}
	var req paymentRequest
	var errs []FieldError
	// A member named as a field in another case is refused, after the
	// field's own error, for which it stands in if the field is missing.
	variants := func(i int) {
		for j, name := range others {
			if of[j] == i {
				errs = append(errs, FieldError{Field: name, Detail: detailCaseVariant[i]})
			}
		}
	}

	if raw, ok := fields["amount"]; !ok {
		if !cased[0] {
			errs = append(errs, FieldError{Field: "amount", Detail: detailRequired})
		}
	} else if given[0] > 1 {
		errs = append(errs, FieldError{Field: "amount", Detail: detailRepeated})
	} else {
		n, err := intOf(raw)
		if err != nil {
			errs = append(errs, FieldError{Field: "amount", Detail: amountRefusal(raw)})
		} else if n <= 0 {
			errs = append(errs, FieldError{Field: "amount", Detail: detailAmountPositive})
		} else {
			req.Amount = n
		}
	}
	variants(0)

	if raw, ok := fields["currency"]; !ok {
		if !cased[1] {
			errs = append(errs, FieldError{Field: "currency", Detail: detailRequired})
		}
	} else if given[1] > 1 {
		errs = append(errs, FieldError{Field: "currency", Detail: detailRepeated})
	} else {
		c, err := stringOf(raw)
		if err != nil || !isCurrency(c) {
			errs = append(errs, FieldError{Field: "currency", Detail: detailCurrency})
		} else {
			req.Currency = strings.ToUpper(c)
		}
	}
	variants(1)

	if raw, ok := fields["recipient"]; !ok {
		if !cased[2] {
			errs = append(errs, FieldError{Field: "recipient", Detail: detailRequired})
		}
	} else if given[2] > 1 {
		errs = append(errs, FieldError{Field: "recipient", Detail: detailRepeated})
	} else {
		r, err := stringOf(raw)
		switch {
		case err != nil || strings.TrimSpace(r) == "":
			errs = append(errs, FieldError{Field: "recipient", Detail: detailRecipient})
		case strings.IndexByte(r, 0) >= 0:
			// PostgreSQL's text cannot hold U+0000: a ledger there would
			// refuse the payment on every retry. Refused here, the request
			// is a final 400 over every ledger alike. Only an escape
			// (\u0000) carries it, so scanPaymentRequest never sees one.
			errs = append(errs, FieldError{Field: "recipient", Detail: detailRecipientNUL})
		default:
			req.Recipient = r
		}
	}
	variants(2)

	for j, name := range others {
		if of[j] < 0 && times[name] > 1 {
			errs = append(errs, FieldError{Field: name, Detail: detailRepeated})
		}
	}
	return req, errs
}

// paymentFields are the members of a payment request, in the order their
// FieldErrors are listed, each followed by those of the members named as
// it in another case (caseVariantOf), before those of other members given
// more than once; the members named as one field, and the others, in the
// order they first appear.
var paymentFields = [...]string{"amount", "currency", "recipient"}

// The details of a payment request's FieldErrors.
const (
	detailRequired       = "is required"
	detailRepeated       = "is given more than once: JSON parsers differ on which value they take, so give it once"
	detailAmountNumber   = "must be a JSON number: an integer of minor units, such as 1250"
	detailAmountInteger  = "must be an integer of minor units, written without a fraction or exponent (1250, not 1250.0 or 1.25e3)"
	detailAmountTooLarge = "must be at most 9223372036854775807"
	detailAmountPositive = "must be greater than 0"
	detailCurrency       = "must be a string of three letters"
	detailRecipient      = "must be a non-blank string: not empty, nor white space alone"
	detailRecipientNUL   = "must not contain U+0000"
)

// detailCaseVariant is the detail of a member that is paymentFields[i]
// in another case, by i. Like every detail of a named field, it follows
// the member's name in the problem's detail ("Amount is ...").
var detailCaseVariant = func() (d [len(paymentFields)]string) {
	for i, name := range paymentFields {
		d[i] = `is "` + name + `" in another case (did you mean "` + name + `"?): member names are case-sensitive, and a parser that ignores case would take this member for "` + name + `"`
	}
	return d
}()

// amountRefusal is the detail of an amount whose JSON value lit, as
// written, is not null and no int64: a value that is no number, a
// number with a fraction or an exponent (an integer by JSON Schema, but
// not in this API), or an integer past the range of int64, too large or,
// below it, not greater than 0.
func amountRefusal(lit []byte) string {
	switch {
	case len(lit) == 0 || lit[0] != '-' && !isDigit(lit[0]):
		return detailAmountNumber
	case bytes.ContainsAny(lit, ".eE"):
		return detailAmountInteger
	case lit[0] == '-':
		return detailAmountPositive
	}
	return detailAmountTooLarge
}

// jsonInt is json.Unmarshal of raw, a valid JSON value, into an int64,
// without reflection for the usual case: an integer literal.
func jsonInt(raw json.RawMessage) (int64, error) {
	if len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') && !bytes.ContainsAny(raw, ".eE") {
		return strconv.ParseInt(string(raw), 10, 64)
	}
	var n int64
	err := json.Unmarshal(raw, &n)
	return n, err
}

// jsonString is json.Unmarshal of raw, a valid JSON value, into a string,
// without reflection for the usual case: valid UTF-8 with no escapes
// (json.Unmarshal would replace invalid UTF-8).
func jsonString(raw json.RawMessage) (string, error) {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	if len(raw) > 0 && raw[0] != '"' {
		return "", errNotString
	}
	var v string
	err := json.Unmarshal(raw, &v)
	return v, err
}

// errNotString is jsonString's error for a value that is not a string.
var errNotString = errors.New("not a JSON string")

// isCurrency reports whether s is three ASCII letters, of any case.
func isCurrency[T string | []byte](s T) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20 // lower-case ASCII letters
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

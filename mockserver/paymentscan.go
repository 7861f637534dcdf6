package mockserver

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// scanPaymentRequest is parsePaymentRequest without encoding/json for the
// bodies clients send: one JSON object, surrounded by whitespace, whose
// members are strings without escapes, numbers, true, false or null. For
// any other body (nested values, escapes, U+0000 among them, a recipient
// that is not UTF-8,
// invalid JSON, anything after the object) it reports !ok and decides
// nothing, and encoding/json takes the body; so it does for a body with
// more than maxScannedOthers other members, or with two whose names have
// invalid UTF-8 or U+FFFD (encoding/json reads invalid UTF-8 as U+FFFD,
// and two such names may be one to it). On
// the bodies it takes, it answers as decodePaymentRequest does, a member
// given more than once refused, and so is one named as a field in another
// case (caseVariantOf); TestScanPaymentRequestAgreesWithJSON
// holds it to that.
func scanPaymentRequest(body []byte) (req paymentRequest, errs []FieldError, ok bool) {
	req, errs, ok, _ = scanPayment(body)
	return req, errs, ok
}

// scanPayment is scanPaymentRequest, also reporting, of a body it takes,
// whether every byte of it is ASCII (ascii): a byte of 0x80 or over can
// only be in a string, and each string's scan tells.
func scanPayment(body []byte) (req paymentRequest, errs []FieldError, ok, ascii bool) {
	ascii = true
	var amount, currency, recipient scannedValue
	var others [maxScannedOthers]scannedName // the other members, in the order they first appear
	var nothers int
	var oddName bool // a name of others has invalid UTF-8 or U+FFFD
	i := skipSpace(body, 0)
	if i == len(body) || body[i] != '{' {
		return req, nil, false, false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		i++
	} else {
		for {
			var key []byte
			var keyASCII bool
			if key, keyASCII, i, ok = scanString(body, i); !ok {
				return req, nil, false, false
			}
			if i = skipSpace(body, i); i == len(body) || body[i] != ':' {
				return req, nil, false, false
			}
			var v scannedValue
			if v, i, ok = scanValue(body, skipSpace(body, i+1)); !ok {
				return req, nil, false, false
			}
			ascii = ascii && keyASCII && (v.kind != kindString || v.ascii)
			switch string(key) {
			case "amount":
				amount.set(v)
			case "currency":
				currency.set(v)
			case "recipient":
				recipient.set(v)
			default:
				if !utf8.Valid(key) || bytes.Contains(key, []byte("\ufffd")) {
					if oddName {
						return req, nil, false, false
					}
					oddName = true
				}
				j := 0
				for j < nothers && !bytes.Equal(others[j].name, key) {
					j++
				}
				if j == nothers {
					if nothers == len(others) {
						return req, nil, false, false
					}
					others[j] = scannedName{name: key, of: caseVariantOf(key)}
					nothers++
				}
				others[j].times++
			}
			if i = skipSpace(body, i); i == len(body) {
				return req, nil, false, false
			}
			if body[i] == ',' {
				i = skipSpace(body, i+1)
				continue
			}
			if body[i] != '}' {
				return req, nil, false, false
			}
			i++
			break
		}
	}
	if skipSpace(body, i) != len(body) {
		return req, nil, false, false
	}
	// json.Unmarshal would replace invalid UTF-8 in the recipient.
	if recipient.kind == kindString && !recipient.ascii && !utf8.Valid(recipient.raw) {
		return req, nil, false, false
	}

	// A member named as a field in another case is refused; it stands
	// in for the field's "is required".
	var cased [len(paymentFields)]bool
	for _, o := range others[:nothers] {
		if o.of >= 0 {
			cased[o.of] = true
		}
	}

	switch amount.kind {
	case kindAbsent:
		if !cased[0] {
			errs = append(errs, FieldError{Field: "amount", Detail: detailRequired})
		}
	case kindRepeated:
		errs = append(errs, FieldError{Field: "amount", Detail: detailRepeated})
	case kindNull: // json.Unmarshal leaves the int64 at 0
		errs = append(errs, FieldError{Field: "amount", Detail: detailAmountPositive})
	case kindInteger:
		n, inRange := parseJSONInteger(amount.raw)
		switch {
		case !inRange:
			errs = append(errs, FieldError{Field: "amount", Detail: amountRefusal(amount.raw)})
		case n <= 0:
			errs = append(errs, FieldError{Field: "amount", Detail: detailAmountPositive})
		default:
			req.Amount = n
		}
	case kindNumber:
		errs = append(errs, FieldError{Field: "amount", Detail: amountRefusal(amount.raw)})
	default:
		errs = append(errs, FieldError{Field: "amount", Detail: detailAmountNumber})
	}
	errs = appendCaseVariants(errs, others[:nothers], 0)

	var cur, rcp []byte // the valid ones
	switch {
	case currency.kind == kindAbsent:
		if !cased[1] {
			errs = append(errs, FieldError{Field: "currency", Detail: detailRequired})
		}
	case currency.kind == kindRepeated:
		errs = append(errs, FieldError{Field: "currency", Detail: detailRepeated})
	case currency.kind != kindString || !isCurrency(currency.raw):
		errs = append(errs, FieldError{Field: "currency", Detail: detailCurrency})
	default:
		cur = currency.raw
	}
	errs = appendCaseVariants(errs, others[:nothers], 1)
	switch {
	case recipient.kind == kindAbsent:
		if !cased[2] {
			errs = append(errs, FieldError{Field: "recipient", Detail: detailRequired})
		}
	case recipient.kind == kindRepeated:
		errs = append(errs, FieldError{Field: "recipient", Detail: detailRepeated})
	case recipient.kind != kindString || len(bytes.TrimSpace(recipient.raw)) == 0:
		errs = append(errs, FieldError{Field: "recipient", Detail: detailRecipient})
	default:
		rcp = recipient.raw
	}
	errs = appendCaseVariants(errs, others[:nothers], 2)
	for _, o := range others[:nothers] {
		if o.of < 0 && o.times > 1 {
			errs = append(errs, FieldError{Field: string(o.name), Detail: detailRepeated})
		}
	}
	// One allocation holds both strings, which live as long as each other
	// in the ledger.
	var sb strings.Builder
	sb.Grow(len(cur) + len(rcp))
	for _, c := range cur {
		sb.WriteByte(c &^ 0x20) // upper case; cur is ASCII letters
	}
	sb.Write(rcp)
	s := sb.String()
	req.Currency, req.Recipient = s[:len(cur)], s[len(cur):]
	return req, errs, true, ascii
}

// maxScannedOthers is the most members other than amount, currency and
// recipient that scanPaymentRequest takes in a body, comparing each name
// to those before it without allocating.
const maxScannedOthers = 8

// scannedName is a member other than amount, currency and recipient as
// scanPaymentRequest read it.
type scannedName struct {
	name  []byte
	times int // how often it is given
	of    int // caseVariantOf(name)
}

// appendCaseVariants appends to errs the error of each of names that is
// paymentFields[i] in another case, in their order.
func appendCaseVariants(errs []FieldError, names []scannedName, i int) []FieldError {
	for _, o := range names {
		if o.of == i {
			errs = append(errs, FieldError{Field: string(o.name), Detail: detailCaseVariant[i]})
		}
	}
	return errs
}

// scannedValue is a member's value as scanPaymentRequest read it.
type scannedValue struct {
	kind  valueKind
	ascii bool   // a string's contents are ASCII
	raw   []byte // a string's contents between the quotes; a number's literal
}

type valueKind uint8

const (
	kindAbsent  valueKind = iota // no such member
	kindString                   // a string without escapes
	kindInteger                  // a number without fraction or exponent
	kindNumber                   // any other number
	kindNull
	kindBool
	kindRepeated // given more than once, whatever the values
)

// set records v as the member's value, or that the member is repeated.
func (m *scannedValue) set(v scannedValue) {
	if m.kind != kindAbsent {
		*m = scannedValue{kind: kindRepeated}
		return
	}
	*m = v
}

// skipSpace returns the index of the first byte of b at or after i that is
// not JSON whitespace, or len(b).
func skipSpace(b []byte, i int) int {
	// Whitespace is at most ' ': one comparison for any other byte.
	for i < len(b) && b[i] <= ' ' && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// scanString reads the string at b[i], which must have no escapes, and
// returns its contents, whether they are ASCII, and the index after it.
func scanString(b []byte, i int) (contents []byte, ascii bool, next int, ok bool) {
	if i == len(b) || b[i] != '"' {
		return nil, false, i, false
	}
	ascii = true
	for j := i + 1; j < len(b); j++ {
		switch stringByte[b[j]] {
		case strPlain:
		case strNonASCII:
			ascii = false
		case strQuote:
			return b[i+1 : j], ascii, j + 1, true
		default:
			return nil, false, j, false
		}
	}
	return nil, false, len(b), false
}

// The classes of bytes in stringByte.
const (
	strPlain    = iota // ASCII that stands for itself in a JSON string
	strNonASCII        // a byte of a multi-byte UTF-8 sequence (or invalid)
	strQuote           // '"', which ends the string
	strRefused         // '\\' or a control character: not taken
)

// stringByte is the class of each byte in a string scanString reads: one
// lookup per byte, where the comparisons would take three.
var stringByte = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c == '"':
			t[c] = strQuote
		case c == '\\' || c < 0x20:
			t[c] = strRefused
		case c >= 0x80:
			t[c] = strNonASCII
		}
	}
	return t
}()

// scanValue reads the value at b[i]: a string without escapes, a number or
// a literal; not an object or an array.
func scanValue(b []byte, i int) (v scannedValue, next int, ok bool) {
	if i == len(b) {
		return v, i, false
	}
	switch c := b[i]; {
	case c == '"':
		v.kind = kindString
		v.raw, v.ascii, next, ok = scanString(b, i)
		return v, next, ok
	case c == '-' || '0' <= c && c <= '9':
		return scanNumber(b, i)
	case c == 'n':
		v.kind = kindNull
		return v, i + 4, hasAt(b, i, "null")
	case c == 't':
		v.kind = kindBool
		return v, i + 4, hasAt(b, i, "true")
	case c == 'f':
		v.kind = kindBool
		return v, i + 5, hasAt(b, i, "false")
	}
	return v, i, false
}

func hasAt(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// scanNumber reads the number at b[i] as JSON's grammar has it:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(b []byte, i int) (v scannedValue, next int, ok bool) {
	j := i
	if b[j] == '-' {
		j++
	}
	switch {
	case j == len(b) || !isDigit(b[j]):
		return v, j, false
	case b[j] == '0':
		j++
	default:
		j = skipDigits(b, j)
	}
	v.kind = kindInteger
	if j < len(b) && b[j] == '.' {
		v.kind = kindNumber
		if j++; j == len(b) || !isDigit(b[j]) {
			return v, j, false
		}
		j = skipDigits(b, j)
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		v.kind = kindNumber
		if j++; j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j == len(b) || !isDigit(b[j]) {
			return v, j, false
		}
		j = skipDigits(b, j)
	}
	v.raw = b[i:j]
	return v, j, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func skipDigits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

// parseJSONInteger is strconv.ParseInt(string(lit), 10, 64) for lit, a JSON
// integer (-?(0|[1-9][0-9]*)): it reports whether lit fits in an int64.
func parseJSONInteger(lit []byte) (n int64, inRange bool) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	const cutoff = 1 << 63 // the magnitude of math.MinInt64
	var u uint64
	for _, c := range lit {
		if u > cutoff/10 {
			return 0, false
		}
		if u = u*10 + uint64(c-'0'); u > cutoff {
			return 0, false
		}
	}
	switch {
	case neg:
		return -int64(u), true // 1<<63 converts, and negates, to math.MinInt64
	case u == cutoff:
		return 0, false
	}
	return int64(u), true
}

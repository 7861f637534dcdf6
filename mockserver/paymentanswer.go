package mockserver

import (
	"net/http"
	"strconv"
)

// writeCreated answers a new (or found) payment: 201, its Location, and p
// as writeJSON writes it, byte for byte, but appended by hand into a pooled
// buffer for the payments whose strings need no escaping (all that the
// server makes from ASCII requests); writeJSON writes the others. made is
// the payment the server made for the request, or nil (see
// appendPaymentJSON); location is made's Location (newPaymentLocation, of
// which made.ID is the tail), or "".
func writeCreated(w http.ResponseWriter, p, made *Payment, location string) {
	writeCreatedWith(w, p, made, location, new([3]string))
}

// writeCreatedWith is writeCreated with vals, an array that the answer's
// header values may take (as the slices of its Location, Content-Type and
// Content-Length), which nothing else uses while the header lives.
func writeCreatedWith(w http.ResponseWriter, p, made *Payment, location string, vals *[3]string) {
	if made == nil || p.ID != made.ID || location == "" {
		location = paymentsPath + p.ID // a payment found, not made
	}
	buf := getBuffer()
	defer putBuffer(buf)
	body, ok := appendPaymentJSON((*buf)[:0], p, made)
	body = append(body, '\n')
	*buf = body
	if !ok {
		w.Header().Set("Location", location)
		writeJSON(w, http.StatusCreated, *p)
		return
	}

	// vals for the three header values, where Header.Set would allocate
	// three: the Location shares the ID's, and the Content-Length is
	// lengthText's.
	vals[0], vals[1], vals[2] = location, "application/json", lengthText(len(body))
	h := w.Header()
	h["Location"], h["Content-Type"], h["Content-Length"] = vals[0:1:1], vals[1:2:2], vals[2:3:3]
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(body)
}

// lengthDigits is the decimal text of 0 to 999, three digits each with
// leading zeros: "000001002...999".
var lengthDigits = func() string {
	b := make([]byte, 0, 3000)
	for n := range 1000 {
		b = append(b, byte('0'+n/100), byte('0'+n/10%10), byte('0'+n%10))
	}
	return string(b)
}()

// lengthText is strconv.Itoa(n), without its allocation for n below 1000
// (a payment's answer is a few hundred bytes long).
func lengthText(n int) string {
	switch {
	case n < 0 || n >= 1000:
		return strconv.Itoa(n)
	case n >= 100:
		return lengthDigits[3*n : 3*n+3]
	case n >= 10:
		return lengthDigits[3*n+1 : 3*n+3]
	}
	return lengthDigits[3*n+2 : 3*n+3]
}

// appendPaymentJSON appends p as json.Marshal encodes it, and reports
// whether it could: false, having appended part of it, when a string of p
// needs escaping or p.Created has no RFC 3339 form. made, if not nil, is
// the payment the server made for the request: its ID, currency, status
// and ref are of the server's making (a new ID, three letters it checked,
// "succeeded", a DerivedKey or "unkeyed-" and an ID) and need no escaping,
// so a string of p equal to made's is not looked at again; the ledger's
// payment may be another (found, or from a ledger that changed it), whose
// strings are checked as the client's, the recipient and the key, always
// are.
func appendPaymentJSON(b []byte, p, made *Payment) ([]byte, bool) {
	if made == nil {
		made = &Payment{}
	}
	if !plainOrMade(p.ID, made.ID) || !plainOrMade(p.Currency, made.Currency) || !plainJSON(p.Recipient) ||
		!plainOrMade(p.Status, made.Status) || !plainJSON(p.IdempotencyKey) || !plainOrMade(p.Ref, made.Ref) {
		return b, false
	}
	b = append(b, `{"id":"`...)
	b = append(b, p.ID...)
	b = append(b, `","amount":`...)
	b = strconv.AppendInt(b, p.Amount, 10)
	b = append(b, `,"currency":"`...)
	b = append(b, p.Currency...)
	b = append(b, `","recipient":"`...)
	b = append(b, p.Recipient...)
	b = append(b, `","status":"`...)
	b = append(b, p.Status...)
	b = append(b, `","idempotency_key":"`...)
	b = append(b, p.IdempotencyKey...)
	b = append(b, `","ref":"`...)
	b = append(b, p.Ref...)
	b = append(b, `","created":"`...)
	// time.Time.MarshalJSON is AppendText quoted.
	t, err := appendTimeText(b, p.Created)
	if err != nil {
		return b, false
	}
	return append(t, `"}`...), true
}

// plainOrMade reports whether json.Marshal writes s as it is between
// quotes, knowing that it does so for made, a string of the server's
// making.
func plainOrMade(s, made string) bool { return s == made || plainJSON(s) }

// plainJSON reports whether json.Marshal writes s as it is between quotes:
// printable ASCII without '"', '\\' and the characters it escapes for HTML.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainJSONByte[s[i]] {
			return false
		}
	}
	return true
}

// plainJSONByte tells, for each byte, what plainJSON tells of a string of
// it alone: a lookup per byte, where the comparisons would take six.
var plainJSONByte = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

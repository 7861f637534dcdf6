package mockserver

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// answerTestPayments are payments that appendPaymentJSON writes and
// payments it leaves to encoding/json.
func answerTestPayments() []Payment {
	usual := Payment{ID: "pay_0123456789abcdef", Amount: 1250, Currency: "EUR", Recipient: "alice", Status: "succeeded",
		IdempotencyKey: "5f0c4a4e-5a8e-4c55-9f4c-0b1b9f7c2a11", Ref: "0b0e7a0e-8d2c-8f37-9a55-5d4c7e6f1a20",
		Created: time.Date(2026, 12, 1, 10, 4, 5, 123e6, time.UTC)}
	ps := []Payment{usual, {}}
	for _, s := range []string{"", " ", "a b", "~!#$%'()*+,-./:;=?@[]^_`{|}", "<", ">", "&", `"`, `\`, "\x00", "\x1f", "\t", "\n", "\x7f",
		"é", "José", "\xff", "a\xc3", "\u2028", "\u2029", "\U0001F600", "</script>"} {
		for i := range 6 {
			p := usual
			*[...]*string{&p.ID, &p.Currency, &p.Recipient, &p.Status, &p.IdempotencyKey, &p.Ref}[i] = s
			ps = append(ps, p)
		}
	}
	for _, n := range []int64{0, 1, -1, 99, 100, math.MaxInt64, math.MinInt64} {
		p := usual
		p.Amount = n
		ps = append(ps, p)
	}
	east := time.FixedZone("east", 5*3600+30*60)
	for _, t := range []time.Time{
		{}, time.Unix(0, 0), time.Unix(0, 0).UTC(), usual.Created.Add(1), usual.Created.Truncate(time.Second),
		usual.Created.In(east), usual.Created.In(time.FixedZone("", -7*3600)), usual.Created.In(time.FixedZone("far", 24*3600)),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		p := usual
		p.Created = t
		ps = append(ps, p)
	}
	return ps
}

// answerTestMade are the payments made by the server that the answer
// tests pass with each of answerTestPayments: none, and the usual payment,
// whose ID, currency, status and ref need no escaping, as a server's.
func answerTestMade() []*Payment {
	usual := answerTestPayments()[0]
	return []*Payment{nil, &usual}
}

func TestAppendPaymentJSONIsMarshal(t *testing.T) {
	for _, made := range answerTestMade() {
		var fast int
		for _, p := range answerTestPayments() {
			want, err := json.Marshal(p)
			got, ok := appendPaymentJSON([]byte("x"), &p, made)
			if !ok {
				continue
			}
			fast++
			if err != nil || string(got) != "x"+string(want) {
				t.Errorf("appendPaymentJSON(%+v, made %+v) = %s, want %s (error %v)", p, made, got[1:], want, err)
			}
		}
		if fast < 10 {
			t.Errorf("appendPaymentJSON wrote only %d payments (made %+v)", fast, made)
		}
		p := answerTestPayments()[0]
		if _, ok := appendPaymentJSON(nil, &p, made); !ok {
			t.Errorf("appendPaymentJSON(%+v, made %+v) left the usual payment to encoding/json", p, made)
		}
	}
}

// TestWriteCreatedIsWriteJSON compares writeCreated with what the handler
// wrote before it: the Location header, then writeJSON.
func TestWriteCreatedIsWriteJSON(t *testing.T) {
	for _, made := range answerTestMade() {
		for _, p := range answerTestPayments() {
			want := httptest.NewRecorder()
			want.Header().Set("Location", "/payments/"+p.ID)
			writeJSON(want, http.StatusCreated, p)
			got := httptest.NewRecorder()
			location := ""
			if made != nil {
				location = "/payments/" + made.ID
			}
			writeCreated(got, &p, made, location)
			if got.Code != want.Code || !reflect.DeepEqual(got.Header(), want.Header()) || got.Body.String() != want.Body.String() {
				t.Errorf("payment %+v (made %+v):\nwriteCreated %d %v %q\nwriteJSON    %d %v %q", p, made,
					got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
			}
		}
	}
}

// TestLengthText: lengthText is strconv.Itoa, its text from lengthDigits
// below 1000.
func TestLengthText(t *testing.T) {
	for n := -2; n < 2100; n++ {
		if got, want := lengthText(n), strconv.Itoa(n); got != want {
			t.Fatalf("lengthText(%d) = %q, want %q", n, got, want)
		}
	}
}

// headerOnlyWriter is a ResponseWriter that keeps its header and
// discards the rest, to count what writeCreated allocates itself.
type headerOnlyWriter http.Header

func (w headerOnlyWriter) Header() http.Header         { return http.Header(w) }
func (w headerOnlyWriter) WriteHeader(int)             {}
func (w headerOnlyWriter) Write(b []byte) (int, error) { return len(b), nil }

// TestWriteCreatedAllocations: the answer to a payment the server made
// takes one allocation of its own, the slice of its three header values
// (the Location is the one newPaymentLocation made, the Content-Length
// lengthText's).
func TestWriteCreatedAllocations(t *testing.T) {
	location := newPaymentLocation()
	p := answerTestPayments()[0]
	p.ID = location[len(paymentsPath):]
	w := headerOnlyWriter(make(http.Header, 8))
	writeCreated(w, &p, &p, location) // the buffer pool's first buffer
	if n := testing.AllocsPerRun(100, func() { writeCreated(w, &p, &p, location) }); n != 1 {
		t.Errorf("writeCreated allocates %v times, want 1", n)
	}
	if got := w["Location"]; len(got) != 1 || got[0] != location {
		t.Errorf("Location %q, want %q", got, location)
	}
}

func TestAppendPaymentJSONAllocations(t *testing.T) {
	p := answerTestPayments()[0]
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { appendPaymentJSON(buf, &p, &p) }); n != 0 {
		t.Errorf("appendPaymentJSON allocates %v times, want 0", n)
	}
}

// TestPlainJSONIsMarshal: plainJSON takes the printable ASCII bytes but
// '"', '\\' and the three that json.Marshal escapes for HTML, and
// json.Marshal writes every byte it takes as it is between quotes.
func TestPlainJSONIsMarshal(t *testing.T) {
	for c := range 256 {
		s := string([]byte{byte(c)})
		want := 0x20 <= c && c <= 0x7e && !strings.Contains(`"\<>&`, s)
		if plainJSON(s) != want || plainJSON("ab"+s+"cd") != want {
			t.Errorf("plainJSON(%q) = %v, want %v", s, plainJSON(s), want)
		}
		if out, err := json.Marshal(s); want && (err != nil || string(out) != `"`+s+`"`) {
			t.Errorf("plainJSON takes %q, which json.Marshal writes %s (%v)", s, out, err)
		}
	}
}

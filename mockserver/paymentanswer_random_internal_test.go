package mockserver

import (
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"
)

// TestWriteCreatedRandom compares writeCreated with the Location header
// and writeJSON on payments of random strings (every byte value, HTML
// characters, U+2028/U+2029, invalid UTF-8), amounts, times (zones with
// minutes and seconds, every sub-second precision, out of RFC 3339's
// range) and on a ResponseWriter that has headers set already.
func TestWriteCreatedRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pieces := []string{"a", "Z", "0", " ", "-", "_", "~", "<", ">", "&", `"`, `\`, "/", "\x00", "\x1f", "\x7f", "\x80", "\xff",
		"é", "\u2028", "\u2029", "\U0001F600", "\xed\xa0\x80", "\ufffd", "\t", "+"}
	var allPlain bool // every string of the payment printable ASCII
	str := func() string {
		var b []byte
		n := rng.IntN(12)
		plain := allPlain || rng.IntN(2) == 0
		for range n {
			if plain {
				b = append(b, byte(0x20+rng.IntN(0x5f)))
			} else {
				b = append(b, pieces[rng.IntN(len(pieces))]...)
			}
		}
		return string(b)
	}
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("", 0), time.FixedZone("z", 3600), time.FixedZone("", -(9*3600 + 30*60)),
		time.FixedZone("", 5*3600+45*60+30), time.FixedZone("", -1), time.FixedZone("", 23*3600+59*60), time.FixedZone("", 24*3600), time.FixedZone("", -24*3600-60)}
	var fast int
	for i := range 50000 {
		allPlain = rng.IntN(2) == 0
		p := Payment{ID: str(), Amount: rng.Int64() >> rng.IntN(64), Currency: str(), Recipient: str(), Status: str(), IdempotencyKey: str(), Ref: str()}
		if rng.IntN(2) == 0 {
			p.Amount = -p.Amount
		}
		if i%97 == 0 {
			p.Amount = []int64{math.MinInt64, math.MaxInt64, 0}[rng.IntN(3)]
		}
		sec := rng.Int64N(400*365*86400) - 5*365*86400 + (-62135596800 + 1900*365*86400) // around years 1895-2295
		if rng.IntN(20) == 0 {
			sec = rng.Int64N(1<<40) - 1<<39 // far out of range too
		}
		nsec := rng.Int64N(1e9)
		switch rng.IntN(4) {
		case 0:
			nsec = 0
		case 1:
			nsec -= nsec % 1e6
		case 2:
			nsec -= nsec % 1e3
		}
		p.Created = time.Unix(sec, nsec).In(zones[rng.IntN(len(zones))])
		if rng.IntN(10) == 0 {
			p.Created = time.Time{}
		}

		want := httptest.NewRecorder()
		got := httptest.NewRecorder()
		if rng.IntN(4) == 0 {
			for _, w := range []*httptest.ResponseRecorder{want, got} {
				w.Header().Set("Content-Type", "text/plain")
				w.Header().Set("Content-Length", "1")
				w.Header().Add("Location", "/elsewhere")
				w.Header().Set("X-Other", "x")
			}
		}
		want.Header().Set("Location", "/payments/"+p.ID)
		writeJSON(want, http.StatusCreated, p)
		if _, ok := appendPaymentJSON(nil, &p, nil); ok {
			fast++
		}
		writeCreated(got, &p, nil, "")
		if got.Code != want.Code || !reflect.DeepEqual(got.Header(), want.Header()) || got.Body.String() != want.Body.String() {
			t.Fatalf("payment %+v:\nwriteCreated %d %v %q\nwriteJSON    %d %v %q", p,
				got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	}
	t.Logf("%d of 50000 written by hand", fast)
	if fast < 2000 {
		t.Errorf("only %d payments written by hand: the test does not exercise appendPaymentJSON", fast)
	}
}

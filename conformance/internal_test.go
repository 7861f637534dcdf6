package conformance

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/contract"
)

// The keys of malformed-key and long-key are refused by the contract's
// grammar, and the others accepted.
func TestKeysAgainstTheGrammar(t *testing.T) {
	if _, err := contract.ParseKey(malformedKey()); err == nil {
		t.Error("malformedKey parses")
	}
	for _, mk := range malformedKeys() {
		if _, err := contract.ParseKeyFields(mk.lines); err == nil {
			t.Errorf("malformed key %s (%q) parses", mk.what, mk.lines)
		}
	}
	long := longKey()
	if len(long) != contract.MaxKeyLen+1 {
		t.Errorf("longKey is %d bytes, want %d", len(long), contract.MaxKeyLen+1)
	}
	if _, err := contract.ParseKey(long); err == nil {
		t.Error("longKey parses")
	}
	if err := contract.ValidKey(long[:contract.MaxKeyLen]); err != nil {
		t.Errorf("longKey is refused for more than its length: %v", err)
	}
	k := newKey("first")
	if got, err := contract.ParseKey(k); err != nil || got != k {
		t.Errorf("ParseKey(%q) = %q, %v", k, got, err)
	}
	if newKey("first") == k {
		t.Error("newKey repeats itself")
	}
}

func TestOtherBody(t *testing.T) {
	for _, body := range []string{`{"a":1}`, ` { "a" : [1] } `, `{}`, `[1]`, `plain`, ``} {
		other := otherBody([]byte(body))
		if string(other) == body {
			t.Errorf("otherBody(%q) is the body", body)
		}
		var obj map[string]any
		if json.Unmarshal([]byte(body), &obj) == nil && obj != nil {
			var got map[string]any
			if err := json.Unmarshal(other, &got); err != nil || got["saferetry_check"] == nil || len(got) != len(obj)+1 {
				t.Errorf("otherBody(%q) = %s, want the object with one more member", body, other)
			}
		}
	}
}

// TestSameLengthBody: the body of the same length changes one byte of a
// value, a number's before a string's, never a member name or an escape,
// and stays valid JSON; a body with nothing to change gets none.
func TestSameLengthBody(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"amount":1250,"currency":"EUR"}`, `{"amount":2250,"currency":"EUR"}`},
		{`{"currency":"EUR","amount":9}`, `{"currency":"EUR","amount":8}`},
		{`{"a":-9}`, `{"a":-8}`},
		{`{"a":0}`, `{"a":1}`},
		{`{"a":1.5e3}`, `{"a":2.5e3}`},
		{`{"a":10E-2}`, `{"a":20E-2}`},
		{`{"a":-0.00}`, `{"a":-0.01}`},
		{`{"a":0.09}`, `{"a":0.08}`},
		{`{"name":"al\u00e9"}`, `{"name":"am\u00e9"}`},
		{`["x\"z"]`, `["x\"y"]`},
		{`{"aa" : "bZ", "b":"c"}`, `{"aa" : "bY", "b":"c"}`},
		{`{"id:":"", "b":"c9"}`, `{"id:":"", "b":"c8"}`},
		{` "9" `, ` "8" `},
		{`amount=1250&currency=EUR`, `amount=1250&currency=EUS`},
		{"!!ÿ", "!!þ"},
		{`{"a":true,"b":null,"c":"","d":"\n"}`, ``},
		{`{}`, ``},
		{``, ``},
	} {
		got := sameLengthBody([]byte(tc.body))
		if string(got) != tc.want || (got == nil) != (tc.want == "") {
			t.Errorf("sameLengthBody(%s) = %q, want %q", tc.body, got, tc.want)
		}
		if got != nil && json.Valid([]byte(tc.body)) && !json.Valid(got) {
			t.Errorf("sameLengthBody(%s) = %s, not JSON", tc.body, got)
		}
	}
}

func TestCountOf(t *testing.T) {
	for _, tc := range []struct {
		body, path string
		want       int64
		bySize     bool
		err        bool
	}{
		{`[1,2,3]`, "", 3, false, false},
		{`null`, "", 0, false, false},
		{` 42 `, "", 42, false, false},
		{`item 1` + "\n" + `item 2`, "", 13, true, false}, // not JSON: its size
		{`{"n":1}`, "", 0, false, true},                   // an object needs a path
		{`"n"`, "", 0, false, true},
		{`1.5`, "", 0, false, true},
		{`{"meta":{"total":42}}`, "/meta/total", 42, false, false},
		{`{"meta":{"total":42}}`, "meta.total", 42, false, false},
		{`{"data":{"items":[{},{}]}}`, "data.items", 2, false, false},
		{`{"a/b":{"c~d":[5]}}`, "/a~1b/c~0d/0", 5, false, false},
		{`{"meta":{"total":"x"}}`, "meta.total", 0, false, true},
		{`{"meta":{}}`, "meta.total", 0, false, true},
		{`{"n":1.5}`, "n", 0, false, true},
		{`not json`, "n", 0, false, true},
		{`{"n":1} {"n":2}`, "n", 0, false, true}, // one value, not two
		{`{"n":9007199254740993}`, "n", 9007199254740993, false, false},
	} {
		got, bySize, err := countOf([]byte(tc.body), tc.path)
		if (err != nil) != tc.err || got != tc.want || bySize != tc.bySize {
			t.Errorf("countOf(%s, %q) = %d, %v, %v; want %d, %v, error %v", tc.body, tc.path, got, bySize, err, tc.want, tc.bySize, tc.err)
		}
	}
}

func TestExcerpt(t *testing.T) {
	if got := excerpt([]byte("é" + strings.Repeat("x", excerptLen))); !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "é") {
		t.Errorf("long excerpt %q", got)
	}
	if got := excerpt([]byte{0xff, 'a'}); got != `"\xffa"` {
		t.Errorf("excerpt of invalid UTF-8 = %s", got)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain € text":       "plain € text",
		"a\nb\tc\r":          `a\nb\tc\r`,
		"\x1b[31mred\x1b[0m": `\x1b[31mred\x1b[0m`,
		"next\u0085line":     `next\u0085line`,
		"\u202egnp.exe":      `\u202egnp.exe`,
		"bad \xff\xfe bytes": `bad \xff\xfe bytes`,
		"€"[:2]:              `\xe2\x82`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSameLengthBodyChangesTheValue: the number sameLengthBody changes must
// change as a value, not only as text: a server may canonicalise a JSON
// body's numbers as IEEE doubles (RFC 8785's JSON Canonicalization Scheme
// does), and then sees, in a body whose first number has more significant
// digits than a double keeps (an ID, an amount in small units), the body
// it fingerprinted first, and replays it rightly; reuse-refused would
// fail it for binding its key to the body's length alone.
func TestSameLengthBodyChangesTheValue(t *testing.T) {
	for _, body := range []string{
		`{"order":12345678901234567890,"currency":"EUR"}`,
		`{"amount":0.30000000000000000004}`,
		`[1.0000000000000000001e5]`,
		`{"a":-98765432109876543210.5}`,
	} {
		got := sameLengthBody([]byte(body))
		var before, after any
		if err := json.Unmarshal([]byte(body), &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &after); err != nil {
			t.Errorf("sameLengthBody(%s) = %s, not JSON", body, got)
			continue
		}
		b, _ := json.Marshal(before)
		a, _ := json.Marshal(after)
		if string(a) == string(b) {
			t.Errorf("sameLengthBody(%s) = %s: the same JSON, %s, with numbers read as doubles", body, got, a)
		}
	}
}

// evidenceTime spans concurrent exchanges from the first sent to the
// last ended, rather than adding their times up; without their starts,
// as decoded from JSON, it adds them up.
func TestEvidenceTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := Duration(time.Second)
	ev := []Exchange{
		{began: t0.Add(200 * time.Millisecond), Elapsed: sec},
		{began: t0, Elapsed: sec},
		{began: t0.Add(100 * time.Millisecond), Elapsed: sec / 2},
	}
	if got := evidenceTime(ev); got != 1200*time.Millisecond {
		t.Errorf("overlapping exchanges: %v, want 1.2s", got)
	}
	ev[0].began = time.Time{}
	if got := evidenceTime(ev); got != 2500*time.Millisecond {
		t.Errorf("an exchange without its start: %v, want the sum, 2.5s", got)
	}
	if got := evidenceTime(nil); got != 0 {
		t.Errorf("no exchange: %v, want 0", got)
	}
}

package idempotency_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/fingerprint_golden.jsonl from the current Fingerprint")

// goldenFile holds v1 fingerprints computed by the implementation of
// commit 55863a0, before the canonicaliser was rewritten to hash without a
// stage copy: stored fingerprints must keep matching their retries. Those of
// bodies sent as text/plain and application/merge-patch+json were computed
// anew when the media type became part of the fingerprint (the same bytes
// under another media type had shared one).
const goldenFile = "testdata/fingerprint_golden.jsonl"

// goldenCase is one request of the golden file; Body is base64, since
// bodies hold invalid UTF-8.
type goldenCase struct {
	Name        string `json:"name"`
	Method      string `json:"m"`
	Target      string `json:"u"`
	ContentType string `json:"ct,omitempty"`
	Body        string `json:"b,omitempty"` // base64; empty for a built case
	Want        string `json:"fp"`
}

// TestFingerprintGolden checks Fingerprint against the golden file: random
// JSON (reordered members, case variants, escapes, invalid UTF-8, lone
// surrogates, every number form, random spacing), broken JSON, other
// media types and queries, stored with their bodies; and large built bodies
// (up to 1 MiB, 64 KiB of members, 511 levels deep), regenerated from their
// names.
func TestFingerprintGolden(t *testing.T) {
	cases := goldenCases()
	if *updateGolden {
		f, err := os.Create(goldenFile)
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(f)
		enc := json.NewEncoder(w)
		for _, c := range cases {
			c.Want = c.fingerprint()
			if strings.HasPrefix(c.Name, "built/") {
				c.Body = ""
			}
			if err := enc.Encode(c); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readGolden(t)
	if len(want) != len(cases) {
		t.Fatalf("%s has %d cases; the generator makes %d", goldenFile, len(want), len(cases))
	}
	for i, c := range cases {
		g := want[i]
		if g.Name != c.Name || (g.Body != "" && g.Body != c.Body) || g.Method != c.Method || g.Target != c.Target || g.ContentType != c.ContentType {
			t.Fatalf("case %d: the generator no longer makes %s", i, g.Name)
		}
		if got := c.fingerprint(); got != g.Want {
			t.Errorf("%s: Fingerprint = %s; want %s (body %.200q)", c.Name, got, g.Want, c.body())
		}
	}
}

func readGolden(t *testing.T) []goldenCase {
	t.Helper()
	f, err := os.Open(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []goldenCase
	dec := json.NewDecoder(f)
	for dec.More() {
		var c goldenCase
		if err := dec.Decode(&c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func (c goldenCase) body() []byte {
	b, err := base64.StdEncoding.DecodeString(c.Body)
	if err != nil {
		panic(err)
	}
	return b
}

func (c goldenCase) fingerprint() string {
	r := httptest.NewRequest(c.Method, c.Target, nil)
	if c.ContentType != "" {
		r.Header.Set("Content-Type", c.ContentType)
	}
	return idempotency.Fingerprint(r, c.body())
}

// goldenCases makes the golden requests, the same on every run.
func goldenCases() []goldenCase {
	rng := rand.New(rand.NewPCG(12, 2026))
	g := &jsonGen{rng: rng}
	var out []goldenCase
	add := func(name, method, target, ct string, body []byte) {
		out = append(out, goldenCase{Name: name, Method: method, Target: target, ContentType: ct,
			Body: base64.StdEncoding.EncodeToString(body)})
	}
	cts := []string{"application/json", "application/json; charset=utf-8", "application/merge-patch+json", "text/plain", "", "application/json;", "Application/JSON"}
	targets := []string{"/pay", "/pay?b=2&a=1", "/pay?a=%41&a=1&b", "/p%2Fq?x=%zz", "/pay?"}
	for i := range 1500 {
		body := g.document()
		if rng.IntN(12) == 0 {
			body = g.corrupt(body)
		}
		ct := "application/json"
		if rng.IntN(6) == 0 {
			ct = cts[rng.IntN(len(cts))]
		}
		target := "/pay"
		if rng.IntN(5) == 0 {
			target = targets[rng.IntN(len(targets))]
		}
		method := "POST"
		if rng.IntN(10) == 0 {
			method = "PATCH"
		}
		add("random/"+strconv.Itoa(i), method, target, ct, body)
	}
	for _, b := range builtBodies() {
		add("built/"+b.name, "POST", "/pay", "application/json", b.body)
	}
	return out
}

type builtBody struct {
	name string
	body []byte
}

// builtBodies are large bodies the golden file names without their bytes:
// the benchmark's shapes, and deep nesting.
func builtBodies() []builtBody {
	var out []builtBody
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		out = append(out, builtBody{"flat-" + strconv.Itoa(size), flatJSON(size)})
		out = append(out, builtBody{"records-" + strconv.Itoa(size), recordsJSON(size)})
	}
	for _, depth := range []int{2, 64, 511, 512, 513} {
		out = append(out, builtBody{"deep-" + strconv.Itoa(depth), deepJSON(1<<20, depth)})
	}
	out = append(out, builtBody{"deep-arrays", []byte(strings.Repeat(`[{"b":1,"a":`, 300) + "0" + strings.Repeat("}]", 300))})
	return out
}

// jsonGen makes random JSON texts that exercise the canonicaliser.
type jsonGen struct{ rng *rand.Rand }

var genNames = []string{"a", "A", "b", "B", "amount", "Amount", "AMOUNT", "id", "ID", "k", "K", "\u212a", "s", "ſ",
	"é", "É", "i", "İ", "ı", "\xff", "\ufffd", "x y", "a\"b", "back\\slash", "\n", "\x1f", "ß", "ẞ", "zz", "_", "0", "",
	"accountId", "amountMinor", "Currency", "\U0001F600", "Ω", "ω"}

func (g *jsonGen) document() []byte {
	var b []byte
	b = g.space(b)
	if g.rng.IntN(10) < 6 {
		b = g.object(b, 0)
	} else {
		b = g.value(b, 0)
	}
	return g.space(b)
}

func (g *jsonGen) space(b []byte) []byte {
	if g.rng.IntN(3) != 0 {
		return b
	}
	return append(b, []string{" ", "\n", "\t", "\r\n  ", "  "}[g.rng.IntN(5)]...)
}

func (g *jsonGen) value(b []byte, depth int) []byte {
	n := 8
	if depth > 4 {
		n = 5 // leaves only
	}
	switch g.rng.IntN(n) {
	case 0:
		return g.str(b, g.text())
	case 1:
		return append(b, []string{"0", "-0", "1", "-12", "1.0", "1e3", "1E+3", "0.1e-7", "12345678901234567890123", "-0.0"}[g.rng.IntN(10)]...)
	case 2:
		return append(b, []string{"true", "false", "null"}[g.rng.IntN(3)]...)
	case 3:
		return g.str(b, genNames[g.rng.IntN(len(genNames))])
	case 4:
		return append(b, `""`...)
	case 5:
		b = append(b, '[')
		for i := range g.rng.IntN(4) {
			if i > 0 {
				b = append(b, ',')
			}
			b = g.space(b)
			b = g.value(b, depth+1)
			b = g.space(b)
		}
		return append(b, ']')
	default:
		return g.object(b, depth)
	}
}

func (g *jsonGen) object(b []byte, depth int) []byte {
	b = append(b, '{')
	for i := range g.rng.IntN(7) {
		if i > 0 {
			b = append(b, ',')
		}
		b = g.space(b)
		b = g.str(b, genNames[g.rng.IntN(len(genNames))])
		b = g.space(b)
		b = append(b, ':')
		b = g.space(b)
		b = g.value(b, depth+1)
		b = g.space(b)
	}
	return append(b, '}')
}

func (g *jsonGen) text() string {
	var s strings.Builder
	for range g.rng.IntN(12) {
		s.WriteString([]string{"a", "Z", " ", "é", "\xfe", "\u2028", "\U0001F600", "\"", "\\", "/", "\t", "\x00", "\x7f"}[g.rng.IntN(13)])
	}
	return s.String()
}

// str writes s as a JSON string, each character spelled at random as
// itself or as an escape.
func (g *jsonGen) str(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x80 {
			r, n := decodeRune(s[i:])
			switch {
			case r < 0: // invalid UTF-8: its byte as it is
				b = append(b, c)
			case g.rng.IntN(3) == 0 && r > 0xffff:
				r -= 0x10000
				b = appendU(appendU(b, 0xd800+(r>>10)), 0xdc00+(r&0x3ff))
			case g.rng.IntN(3) == 0:
				b = appendU(b, r)
			default:
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		i++
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || g.rng.IntN(8) == 0:
			if e := map[byte]byte{'\n': 'n', '\t': 't', '/': '/', '\b': 'b'}[c]; e != 0 && g.rng.IntN(2) == 0 {
				b = append(b, '\\', e)
			} else {
				b = appendU(b, rune(c))
			}
		default:
			b = append(b, c)
		}
	}
	if g.rng.IntN(40) == 0 { // a lone surrogate
		b = appendU(b, rune(0xd800+g.rng.IntN(0x800)))
	}
	return append(b, '"')
}

func appendU(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
}

// decodeRune decodes the UTF-8 character at the start of s; r is -1 for an
// invalid byte.
func decodeRune(s string) (rune, int) {
	for _, r := range s {
		if r == '\ufffd' && !strings.HasPrefix(s, "\ufffd") {
			return -1, 1
		}
		return r, len(string(r))
	}
	return -1, 1
}

// corrupt breaks a text in one of the ways a client can.
func (g *jsonGen) corrupt(b []byte) []byte {
	if len(b) == 0 {
		return []byte("{")
	}
	switch g.rng.IntN(4) {
	case 0:
		return b[:g.rng.IntN(len(b))]
	case 1:
		return append(b, ',')
	case 2:
		i := g.rng.IntN(len(b))
		return append(append(b[:i:i], '\x01'), b[i:]...)
	default:
		return append([]byte("//"), b...)
	}
}

// flatJSON returns an object of about size bytes whose members are small
// values, with names in no particular order.
func flatJSON(size int) []byte {
	b := []byte{'{'}
	for i := 0; len(b) < size-40; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `"field_`...)
		b = strconv.AppendInt(b, int64((i*7919)%100003), 10)
		b = append(b, `":"value `...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `"`...)
	}
	return append(b, '}')
}

// recordsJSON returns an object of about size bytes holding an array of
// records with camelCase names in struct order, like an API body.
func recordsJSON(size int) []byte {
	b := []byte(`{"requestId":"req_0123456789","items":[`)
	for i := 0; len(b) < size-120; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"sku":"SKU-`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `","unitPrice":`...)
		b = strconv.AppendInt(b, int64(100+i%900), 10)
		b = append(b, `,"qty":2,"Tags":["a","b"],"note":"caf\u00e9 \/ line\n"}`...)
	}
	return append(b, `],"total":2090}`...)
}

// deepJSON returns about size bytes nested depth objects deep, each level
// out of order: {"z":{...},"a":"<filler>"}.
func deepJSON(size, depth int) []byte {
	fill := max((size-depth*16)/depth, 0)
	leaf := strings.Repeat("x", fill)
	var b []byte
	for range depth {
		b = append(b, `{"z":`...)
	}
	b = append(b, `0`...)
	for range depth {
		b = append(b, `,"a":"`...)
		b = append(b, leaf...)
		b = append(b, `"}`...)
	}
	return b
}

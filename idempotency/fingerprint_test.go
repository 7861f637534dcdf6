package idempotency_test

import (
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/saferetry/saferetry/idempotency"
)

func fp(method, target, contentType, body string) string {
	r := httptest.NewRequest(method, target, nil)
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return idempotency.Fingerprint(r, []byte(body))
}

func TestFingerprint(t *testing.T) {
	base := fp("POST", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`)
	if !strings.HasPrefix(base, "v1:") || len(base) != len("v1:")+64 {
		t.Fatalf("fingerprint %q: want v1: and 64 hex digits", base)
	}
	same := []struct{ name, method, target, ct, body string }{
		{"reordered members", "POST", "/pay?x=1&y=2", "application/json", `{"tags":["x","y"],"amount":10,"account":"a"}`},
		{"whitespace", "POST", "/pay?x=1&y=2", "application/json", "{ \"account\" : \"a\",\n \"amount\" : 10, \"tags\" : [ \"x\" , \"y\" ] }"},
		{"escapes", "POST", "/pay?x=1&y=2", "application/json", `{"\u0061ccount":"\u0061","amount":10,"tags":["x","y"]}`},
		{"reordered query", "POST", "/pay?y=2&x=1", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"json media type parameters", "POST", "/pay?x=1&y=2", "application/json; charset=utf-8", `{"amount":10,"account":"a","tags":["x","y"]}`},
	}
	for _, tt := range same {
		if got := fp(tt.method, tt.target, tt.ct, tt.body); got != base {
			t.Errorf("%s: fingerprint differs", tt.name)
		}
	}
	different := []struct{ name, method, target, ct, body string }{
		{"changed value", "POST", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":11,"tags":["x","y"]}`},
		{"number spelling", "POST", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":10.0,"tags":["x","y"]}`},
		{"string vs number", "POST", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":"10","tags":["x","y"]}`},
		{"array order", "POST", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":10,"tags":["y","x"]}`},
		{"extra member", "POST", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":10,"tags":["x","y"],"n":null}`},
		{"method", "PATCH", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"path", "POST", "/pay/2?x=1&y=2", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"escaped slash in path", "POST", "/pay%2F2?x=1&y=2", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"query value", "POST", "/pay?x=1&y=3", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"no query", "POST", "/pay", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"not JSON: raw bytes", "POST", "/pay?x=1&y=2", "text/plain", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"+json media type", "POST", "/pay?x=1&y=2", "application/merge-patch+json", `{"account":"a","amount":10,"tags":["x","y"]}`},
	}
	seen := map[string]string{base: "base"}
	for _, tt := range different {
		got := fp(tt.method, tt.target, tt.ct, tt.body)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s: same fingerprint as %s", tt.name, prev)
		}
		seen[got] = tt.name
	}
	// A body that is not JSON is taken byte for byte.
	if fp("POST", "/", "text/plain", "b=1 a=2") == fp("POST", "/", "text/plain", "a=2 b=1") {
		t.Errorf("raw bodies with different bytes share a fingerprint")
	}
	if fp("POST", "/", "application/json", "{not json") == fp("POST", "/", "application/json", "{not  json") {
		t.Errorf("invalid JSON bodies with different bytes share a fingerprint")
	}
	// The documented choices.
	if fp("POST", "/", "application/json", `{"s":"\u00e9\/"}`) != fp("POST", "/", "application/json", `{"s":"é/"}`) {
		t.Errorf("escaped and literal strings differ")
	}
	if fp("POST", "/", "application/json", `{"a":1,"a":2}`) == fp("POST", "/", "application/json", `{"a":2,"a":1}`) {
		t.Errorf("duplicate members in another order share a fingerprint")
	}
	if fp("POST", "/", "application/json", `{"n":1}`) == fp("POST", "/", "application/json", `{"n":1e0}`) {
		t.Errorf("1 and 1e0 share a fingerprint")
	}
	if fp("POST", "/?a=%41&b", "", "") != fp("POST", "/?b=&a=A", "", "") {
		t.Errorf("decoded-equal queries differ")
	}
	if fp("POST", "/", "application/json", `{}`) == fp("POST", "/", "text/plain", `{}`) {
		t.Errorf("the same bytes as JSON and as text share a fingerprint")
	}
	// Repeated query values keep their order.
	if fp("POST", "/?a=1&a=2", "", "") == fp("POST", "/?a=2&a=1", "", "") {
		t.Errorf("the order of repeated query values was lost")
	}
	// Field boundaries are unambiguous.
	if fp("POST", "/ab", "", "") == fp("POST", "/a", "", "b") {
		t.Errorf("path and body run together")
	}
}

func FuzzFingerprintJSONOrder(f *testing.F) {
	f.Add("a", "b", int64(1), "x")
	f.Fuzz(func(t *testing.T, k1, k2 string, n int64, s string) {
		if k1 == k2 {
			return
		}
		q := func(v string) string {
			b := strings.Builder{}
			b.WriteByte('"')
			for i := 0; i < len(v); i++ { // bytes, not runes: invalid UTF-8 stays distinct
				switch c := v[i]; {
				case c == '"' || c == '\\':
					b.WriteString(`\` + string(c))
				case c < 0x20:
					b.WriteString(`\u00` + string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15]))
				default:
					b.WriteByte(c)
				}
			}
			b.WriteByte('"')
			return b.String()
		}
		num := strconv.FormatInt(n, 10)
		a := "{" + q(k1) + ":" + num + "," + q(k2) + ":" + q(s) + "}"
		b := "{ " + q(k2) + " : " + q(s) + " , " + q(k1) + " : " + num + " }"
		// a ends with the string and b with the number, so a
		// case-insensitive decoder reads case variants differently.
		same := fp("POST", "/", "application/json", a) == fp("POST", "/", "application/json", b)
		if variants := jsonFold(k1) == jsonFold(k2); variants && same {
			t.Fatalf("case variants in another order share a fingerprint: %s vs %s", a, b)
		} else if !variants && !same {
			t.Fatalf("reordered members differ: %s vs %s", a, b)
		}
		c := "{" + q(k1) + ":" + strconv.FormatInt(n+1, 10) + "," + q(k2) + ":" + q(s) + "}"
		if fp("POST", "/", "application/json", a) == fp("POST", "/", "application/json", c) {
			t.Fatalf("changed value gives the same fingerprint: %s vs %s", a, c)
		}
	})
}

// jsonFold folds a decoded member name as the fingerprint does: each rune,
// invalid UTF-8 read as U+FFFD, to the upper case of its lower case.
func jsonFold(name string) string {
	var b strings.Builder
	for _, r := range name {
		b.WriteRune(unicode.ToUpper(unicode.ToLower(r)))
	}
	return b.String()
}

// TestFingerprintV1Golden pins the v1 fingerprints of bodies without case
// variants, computed before case-variant names kept their order: stored
// fingerprints must keep matching their retries.
func TestFingerprintV1Golden(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"flat", `{"account":"acct_0123456789","amount":12345,"currency":"EUR","memo":"benchmark payment number 0001"}`,
			"v1:2758dac0c4c53d5bd5863d8a7f3bc60e1d6ba0ef60e503e4a627158a7893b3e1"},
		{"mixed case", `{"b":1,"a":[1,2,{"d":null,"c":true}],"Z":"x","_":false,"accountId":"A","AccountID2":"B"}`,
			"v1:e7a496f80da89d4b7d54618171ee21488cbfa4e18740c1b9fc53996316fc1f4a"},
		{"nested", `{"order":{"items":[{"sku":"X","qty":2},{"qty":1,"sku":"Y"}],"customerId":"c_1"},"total":1.50}`,
			"v1:ff394564aa127039b6828bf3a543c18f740010c10521d6b69c4eb529472ba436"},
		{"unicode", `{"é":"\u00e9","e":"ü","\u212a":1,"\ud83d\ude00":"\ud800","ß":"x","Ω":2}`,
			"v1:1dc241e3ae3a77d2bd7f92b8922e98d4524436c4b5c1a86a99613b9ad3e09c73"},
		{"duplicates", `{"a":1,"a":2,"b":[{"x":1,"x":1}],"A1":0,"a":3}`,
			"v1:347656b14be222bd381305d9e2cffc6231feb8ec8cd770641c7cc6a8fbb6071a"},
		{"escaped names", `{"a\nb":1,"a\u001fb":2,"\"q\"":3,"back\\slash":4,"\u0041":5}`,
			"v1:006e49a0e3fa516c1c4825c4f3ef56b2c7223b15ceb0e343bbb1f1792d239133"},
		{"invalid UTF-8", "{\"\xff\":\"\xfe\",\"a\":1}",
			"v1:82959220ab940d0ea467a9790b638207d4cf73b9283ddbbe290071d2e8a255ad"},
		{"array of objects", `[{"b":2,"a":1},{"B":2,"A":1},[]]`,
			"v1:8a914db223b672e2e851be55179447da5618a3aa2791f39f154cc6af766696b5"},
		{"lone surrogate", `{"\udc00":1,"x":2}`,
			"v1:871e00fdb81b78a6966dc6a314eb8de84c3604e82b7c21bc12c4a318d347c8ad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fp("POST", "/pay", "application/json", tt.body); got != tt.want {
				t.Errorf("Fingerprint(%s) = %s; want %s", tt.body, got, tt.want)
			}
		})
	}
}

func TestFingerprintCaseVariants(t *testing.T) {
	tests := []struct {
		name, a, b string
		same       bool
	}{
		{"ASCII variants", `{"amount":100,"Amount":5}`, `{"Amount":5,"amount":100}`, false},
		{"nested variants", `{"p":{"amount":100,"AMOUNT":5}}`, `{"p":{"AMOUNT":5,"amount":100}}`, false},
		{"variants in an array", `[{"id":1,"ID":2}]`, `[{"ID":2,"id":1}]`, false},
		{"e acute", `{"é":1,"É":2}`, `{"É":2,"é":1}`, false},
		{"Kelvin sign and k", `{"k":1,"\u212a":2}`, `{"\u212a":2,"k":1}`, false},
		{"Kelvin sign and K", "{\"K\":1,\"\u212a\":2}", "{\"\u212a\":2,\"K\":1}", false},
		{"long s and s", `{"s":1,"ſ":2}`, `{"ſ":2,"s":1}`, false},
		{"dotted I and i", `{"i":1,"İ":2}`, `{"İ":2,"i":1}`, false},
		{"U+FFFD spellings", "{\"\xff\":1,\"\ufffd\":2}", "{\"\ufffd\":2,\"\xff\":1}", false},
		{"lone surrogates", `{"\ud800":1,"\udc00":2}`, `{"\udc00":2,"\ud800":1}`, false},
		{"escaped variant", `{"\u0041":1,"a":2}`, `{"a":2,"A":1}`, false},
		{"three variants", `{"a":1,"A":2,"b":0,"a":3}`, `{"b":0,"a":1,"a":3,"A":2}`, false},
		// The same name spelled differently is one name, not a variant.
		{"escape spelling", `{"\u0041":1,"A":2}`, `{"A":1,"\u0041":2}`, true},
		{"escaped control", `{"\u001F":1,"t":0,"T":0}`, `{"\u001f":1,"t":0,"T":0}`, true},
		// Escapes are not letters: nothing here folds equal.
		{"escapes stay apart", `{"\n":1,"N":2,"\t":3,"T":4,"\u001f":5,"U001F":6}`, `{"U001F":6,"T":4,"N":2,"\u001f":5,"\t":3,"\n":1}`, true},
		// Members that are not case variants still reorder freely, also
		// beside variants.
		{"reorder beside variants", `{"x":0,"amount":100,"y":[1],"Amount":5}`, `{"amount":100,"y":[1],"Amount":5,"x":0}`, true},
		{"classes reorder", `{"a":1,"A":2,"b":3,"B":4}`, `{"b":3,"a":1,"B":4,"A":2}`, true},
		{"camelCase reorder", `{"accountId":1,"amountMinor":2,"Currency":3}`, `{"Currency":3,"amountMinor":2,"accountId":1}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := fp("POST", "/", "application/json", tt.a), fp("POST", "/", "application/json", tt.b)
			if (a == b) != tt.same {
				t.Errorf("%s and %s: same fingerprint = %v; want %v", tt.a, tt.b, a == b, tt.same)
			}
		})
	}
}

// foldDoc decodes a generated body the way an application's struct does:
// encoding/json matches its fields case-insensitively, the last match
// winning.
type foldDoc struct {
	A any      `json:"a"`
	B any      `json:"b"`
	E any      `json:"é"`
	K any      `json:"k"`
	S any      `json:"s"`
	I any      `json:"i"`
	N *foldDoc `json:"n"`
}

// TestFingerprintDecodersAgree is a property check: random bodies, and
// their members shuffled, respelled and re-spaced, share a fingerprint only
// if encoding/json reads them the same into a map (case-sensitive) and into
// a struct (case-insensitive); and shuffles that keep the order of case
// variants share it.
func TestFingerprintDecodersAgree(t *testing.T) {
	// Each entry is one decoded name and its spellings; entries with the
	// same class are case variants of each other.
	names := []struct {
		class     string
		spellings []string
	}{
		{"A", []string{`"a"`, `"\u0061"`}},
		{"A", []string{`"A"`, `"\u0041"`}},
		{"B", []string{`"b"`}},
		{"B", []string{`"B"`}},
		{"É", []string{`"é"`, `"\u00e9"`}},
		{"É", []string{`"É"`, `"\u00C9"`}},
		{"K", []string{`"k"`}},
		{"K", []string{`"K"`, `"\u004b"`}},
		{"K", []string{`"\u212a"`, "\"\u212a\""}},
		{"S", []string{`"s"`}},
		{"S", []string{`"S"`}},
		{"S", []string{`"ſ"`, `"\u017F"`}},
		{"I", []string{`"i"`}},
		{"I", []string{`"İ"`}},
		{"I", []string{`"ı"`}},
		{"\ufffd", []string{`"\ufffd"`, "\"\ufffd\""}},
		{"\ufffd", []string{`"\ud800"`}},
		{"\ufffd", []string{"\"\xff\""}},
		{"N", []string{`"n"`}},
		{"N", []string{`"N"`}},
		{"\n", []string{`"\n"`, `"\u000A"`}},
		{"X", []string{`"x"`}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	type member struct {
		name int // index into names
		val  string
	}
	type object []member
	var genObject func(depth int) object
	genValue := func(name, depth int) string {
		if names[name].class == "N" || (depth < 2 && rng.IntN(5) == 0) {
			return "{}" // a placeholder, filled in by render
		}
		return []string{`0`, `1`, `"x"`, `null`}[rng.IntN(4)]
	}
	nested := map[*member]object{}
	genObject = func(depth int) object {
		o := make(object, 1+rng.IntN(4))
		for i := range o {
			o[i].name = rng.IntN(len(names))
			o[i].val = genValue(o[i].name, depth)
		}
		for i := range o {
			if o[i].val == "{}" && depth < 2 {
				nested[&o[i]] = genObject(depth + 1)
			}
		}
		return o
	}
	// render writes o with random spellings and spacing, its members in
	// the order perm gives (a fresh one for every object).
	var render func(b *strings.Builder, o object, perm func(object) []int)
	render = func(b *strings.Builder, o object, perm func(object) []int) {
		b.WriteByte('{')
		for n, i := range perm(o) {
			if n > 0 {
				b.WriteString([]string{",", " , ", ",\n"}[rng.IntN(3)])
			}
			sp := names[o[i].name].spellings
			b.WriteString(sp[rng.IntN(len(sp))])
			b.WriteByte(':')
			if sub, ok := nested[&o[i]]; ok {
				render(b, sub, perm)
			} else {
				b.WriteString(o[i].val)
			}
		}
		b.WriteByte('}')
	}
	identity := func(o object) []int {
		p := make([]int, len(o))
		for i := range p {
			p[i] = i
		}
		return p
	}
	shuffled := func(o object) []int {
		p := identity(o)
		rng.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		return p
	}
	// classKept shuffles, then puts each class's members back in their
	// order on the positions the class took.
	classKept := func(o object) []int {
		p := shuffled(o)
		byClass := map[string][]int{}
		for i := range o { // in order
			c := names[o[i].name].class
			byClass[c] = append(byClass[c], i)
		}
		for n, i := range p {
			c := names[o[i].name].class
			p[n], byClass[c] = byClass[c][0], byClass[c][1:]
		}
		return p
	}
	type reading struct {
		body   string
		sens   map[string]any
		insens foldDoc
	}
	read := func(body string) reading {
		r := reading{body: body}
		for _, v := range []any{&r.sens, &r.insens} {
			d := json.NewDecoder(strings.NewReader(body))
			d.UseNumber()
			if err := d.Decode(v); err != nil {
				t.Fatalf("decode %s: %v", body, err)
			}
		}
		return r
	}
	byFingerprint := map[string]reading{}
	check := func(body string) string {
		f := fp("POST", "/", "application/json", body)
		r := read(body)
		if prev, ok := byFingerprint[f]; !ok {
			byFingerprint[f] = r
		} else if !reflect.DeepEqual(prev.sens, r.sens) || !reflect.DeepEqual(prev.insens, r.insens) {
			t.Errorf("same fingerprint, read differently:\n%s\n%s", prev.body, body)
		}
		return f
	}
	render1 := func(o object, perm func(object) []int) string {
		var b strings.Builder
		render(&b, o, perm)
		return b.String()
	}
	readApart := 0
	for range 300 {
		o := genObject(0)
		base := render1(o, identity)
		want := check(base)
		for range 3 {
			if body := render1(o, classKept); check(body) != want {
				t.Errorf("case variants kept in order, fingerprints differ:\n%s\n%s", base, body)
			}
			body := render1(o, shuffled)
			check(body)
			if r, b := read(base), read(body); !reflect.DeepEqual(r.sens, b.sens) || !reflect.DeepEqual(r.insens, b.insens) {
				readApart++
			}
		}
	}
	// The shuffles must have produced bodies read differently, or the
	// check above proved nothing.
	t.Logf("%d fingerprints, %d shuffles read differently", len(byFingerprint), readApart)
	if readApart < 50 {
		t.Errorf("only %d shuffles are read differently; the generator is too tame", readApart)
	}
}

package idempotency

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{" { \"a\" : [ 1 , 2 ] ,\n\t\"b\" : { } } ", `{"a":[1,2],"b":{}}`},
		{`{"z":{"y":1,"x":[{"d":1,"c":2}]},"a":null}`, `{"a":null,"z":{"x":[{"c":2,"d":1}],"y":1}}`},
		{`[]`, `[]`},
		{`[ ]`, `[]`},
		{`{ }`, `{}`},
		{`1.0`, `1.0`},
		{`1e3`, `1e3`},
		{`-0`, `-0`},
		{`12345678901234567890123`, `12345678901234567890123`},
		{`0.1E-7`, `0.1E-7`},
		{`true`, `true`},
		{`[false,null]`, `[false,null]`},
		{`"\u0041\/\t"`, `"A/\t"`},
		{`"\u00e9"`, "\"\u00e9\""},
		{`"\ud83d\ude00"`, "\"\U0001F600\""},
		{`"\uD800"`, `"\ud800"`},
		{`"\u001f\u0008"`, `"\u001f\b"`},
		{`"a\"b\\c"`, `"a\"b\\c"`},
		{`{"a":1,"a":2}`, `{"a":1,"a":2}`},
		{`{"b":1,"a":1,"b":2}`, `{"a":1,"b":1,"b":2}`},
		{`{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		// Case variants keep their order, sorted by folded name; without
		// them, upper case sorts before lower case as bytes do.
		{`{"b":1,"A":2}`, `{"A":2,"b":1}`},
		{`{"amount":100,"Amount":5}`, `{"amount":100,"Amount":5}`},
		{`{"Amount":5,"amount":100}`, `{"Amount":5,"amount":100}`},
		{`{"b":1,"a":2,"A":3,"_":4}`, `{"a":2,"A":3,"b":1,"_":4}`},
		{`{"b":1,"A":3,"a":2}`, `{"A":3,"a":2,"b":1}`},
		{`{"z":{"b":1,"B":2},"a":0}`, `{"a":0,"z":{"b":1,"B":2}}`},
		{`{"\u212a":1,"k":2}`, "{\"\u212a\":1,\"k\":2}"},
		{`{"S":1,"\u017f":2,"s":3}`, "{\"S\":1,\"\u017f\":2,\"s\":3}"},
		{`{"É":1,"é":2,"e":3}`, `{"e":3,"É":1,"é":2}`},
		{`{"\u0041":1,"a":2}`, `{"A":1,"a":2}`},
		{`{"\udc00":1,"\ud800":2}`, `{"\udc00":1,"\ud800":2}`},
		{"{\"\xff\":1,\"\ufffd\":2}", "{\"\xff\":1,\"\ufffd\":2}"},
		// One name spelled twice is a duplicate, not a variant; escapes
		// decode to characters that fold to themselves.
		{`{"\u0041":2,"A":1}`, `{"A":2,"A":1}`},
		{`{"\u001F":1,"\u001f":2}`, `{"\u001f":1,"\u001f":2}`},
		{`{"\n":1,"N":2,"\\N":3}`, `{"N":2,"\\N":3,"\n":1}`},
	}
	for _, tt := range tests {
		got, err := appendCanonicalJSON(nil, []byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("canonical(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	invalid := []string{``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `.5`, `1e`, `-`, `+1`,
		`tru`, `nul`, `"abc`, `"a` + "\n" + `b"`, `"\x"`, `"\u12"`, `"\u12G4"`, `[1] 2`, `{"a":1}}`, `NaN`,
		strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)}
	for _, in := range invalid {
		if got, err := appendCanonicalJSON(nil, []byte(in)); err == nil {
			t.Errorf("canonical(%q) = %s; want an error", in, got)
		}
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,2,{"d":null,"c":true}]}`, `"\ud800\u0041"`, `[1e3, -0.5]`, `{"a":1,"a":2}`,
		`{"\u00e9":"x","e":"y"}`, "\"\xff\"", `{`, `1.`, `{"a":1,"A":2}`, `{"K":1,"\u212a":2,"k":3}`, `{"\u00c9":1,"é":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := appendCanonicalJSON(nil, in)
		if valid := json.Valid(in); valid != (err == nil) {
			t.Fatalf("canonical(%q): err %v but json.Valid = %v", in, err, valid)
		}
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("canonical(%q) = %q is not valid JSON", in, out)
		}
		again, err := appendCanonicalJSON(nil, out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("canonical is not idempotent: %q -> %q -> %q (%v)", in, out, again, err)
		}
		var a, b any
		da, db := json.NewDecoder(bytes.NewReader(in)), json.NewDecoder(bytes.NewReader(out))
		da.UseNumber()
		db.UseNumber()
		if da.Decode(&a) != nil || db.Decode(&b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("canonical(%q) = %q decodes differently", in, out)
		}
		// A struct matches names case-insensitively, the last match winning.
		var sa, sb struct {
			A, K, S, E any
			X          any `json:"é"`
		}
		if json.Unmarshal(in, &sa) == nil && (json.Unmarshal(out, &sb) != nil || !reflect.DeepEqual(sa, sb)) {
			t.Fatalf("canonical(%q) = %q decodes differently into a struct", in, out)
		}
	})
}

// TestFoldRune checks the claims made for the folding: it joins every pair
// of runes bytes.EqualFold finds equal (the SimpleFold orbits), it is
// stable, and foldedRune's ASCII shortcut agrees with it. Only runes in
// unicode.CaseRanges have case mappings, and every orbit of more than one
// rune holds one of them (ß's holds ẞ), so walking their orbits covers
// every rune that does not fold to itself alone.
func TestFoldRune(t *testing.T) {
	for _, cr := range unicode.CaseRanges {
		for r := rune(cr.Lo); r <= rune(cr.Hi); r++ {
			f := foldRune(r)
			if foldRune(f) != f {
				t.Errorf("foldRune(%U) = %U, which folds to %U", r, f, foldRune(f))
			}
			for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
				if foldRune(o) != f {
					t.Errorf("foldRune(%U) = %U but foldRune(%U) = %U, in one SimpleFold orbit", r, f, o, foldRune(o))
				}
			}
		}
	}
	for b := byte(0x20); b < utf8.RuneSelf; b++ {
		if b == '"' || b == '\\' {
			continue
		}
		if got, n := foldedRune([]byte{b}, 0); got != foldRune(rune(b)) || n != 1 {
			t.Errorf("foldedRune(%q) = %q, %d; want %q", b, got, n, foldRune(rune(b)))
		}
	}
}

func TestCompareFolded(t *testing.T) {
	// Canonical string contents, as in c.out.
	tests := []struct {
		a, b string
		want int
	}{
		{"amount", "AMOUNT", 0},
		{"k", "\u212a", 0},
		{"s", "\u017f", 0},
		{"\u00e9", "\u00c9", 0},
		{"i", "\u0130", 0},
		{"\xff", "\ufffd", 0},
		{`\ud800`, "\ufffd", 0},
		{`\ud800`, `\udfff`, 0},
		{`\n`, "N", -1},  // a newline, not the letter n
		{`\\N`, `\\`, 1}, // a backslash and N, against a backslash
		{`\u001f`, "U001F", -1},
		{`\"`, `"`, 0},
		{"a", "ab", -1},
		{"ab", "A", 1},
		{"", "", 0},
	}
	for _, tt := range tests {
		if got := compareFolded([]byte(tt.a), []byte(tt.b)); got != tt.want {
			t.Errorf("compareFolded(%q, %q) = %d; want %d", tt.a, tt.b, got, tt.want)
		}
		if got := compareFolded([]byte(tt.b), []byte(tt.a)); got != -tt.want {
			t.Errorf("compareFolded(%q, %q) = %d; want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

// TestNameKeyOrder: members sort by their keys (see nameKey) exactly as by
// their encoded names, for names of every length around the keys' 8- and
// 16-byte boundaries, many sharing prefixes, with what lies past a name in
// the buffer's spare capacity not mattering.
func TestNameKeyOrder(t *testing.T) {
	var names []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		names = append(names, prefix)
		if n == 0 {
			return
		}
		for _, c := range []string{"a", "b"} {
			gen(prefix+c, n-1)
		}
	}
	gen("", 4)
	for _, n := range []int{7, 8, 9, 15, 16, 17, 24} {
		for _, tail := range []string{"", "a", "b"} {
			names = append(names, strings.Repeat("a", n)+tail, strings.Repeat("a", n-1)+"b"+tail)
		}
	}
	member := func(out []byte, start int) member {
		colon := start + 1 + bytes.IndexByte(out[start+1:], '"') + 1
		return member{span: span{start: start}, colon: colon, key: nameKey(out, start+1, colon)}
	}
	for _, x := range names {
		for _, y := range names {
			// Both names in one buffer, as members lie in out, and
			// spare capacity past them full of bytes that sort high.
			buf := make([]byte, 0, len(x)+len(y)+4+16)
			buf = append(buf, `"`+x+`""`+y+`"`...)
			for i := len(buf); i < cap(buf); i++ {
				buf[:cap(buf)][i] = 0xff
			}
			a, b := member(buf, 0), member(buf, len(x)+2)
			want := bytes.Compare(buf[a.start:a.colon], buf[b.start:b.colon]) < 0
			if got := nameLess(buf, &a, &b); got != want {
				t.Fatalf("nameLess(%q, %q) = %v, want %v", x, y, got, want)
			}
		}
	}
}

// TestCanonicaliserRoom: read sizes its output once, with the room
// nameKey's load needs past a name, so that a body whose last name ends at
// its end is not copied to a buffer a quarter larger (which, near the
// pool's limit, would cost the pooled buffers).
func TestCanonicaliserRoom(t *testing.T) {
	for _, body := range []string{`{"a":1}`, `{"z":1,"a":"` + strings.Repeat("x", 1<<20) + `","b":{"y":2,"x":3}}`} {
		var c canonicaliser
		if err := c.read([]byte(body)); err != nil {
			t.Fatal(err)
		}
		if got, want := cap(c.out), len(body)+16; got != want {
			t.Errorf("a body of %d bytes left out with capacity %d, want %d", len(body), got, want)
		}
	}
}

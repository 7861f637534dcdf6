package idempotency

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
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
		`{"\u00e9":"x","e":"y"}`, "\"\xff\"", `{`, `1.`} {
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
	})
}

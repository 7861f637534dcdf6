package contract

import (
	"errors"
	"strings"
	"testing"
)

// parseKeyTests are TestParseKey's cases; TestKeyPatternAgrees runs
// them too.
var parseKeyTests = func() []parseKeyTest {
	long := strings.Repeat("k", MaxKeyLen)
	return []parseKeyTest{
		{"raw", "abc", "abc", true},
		{"uuid", "8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", true},
		{"raw with inner space", "a b", "a b", true},
		{"raw with backslash", `a\b`, `a\b`, true},
		{"raw with semicolon", "abc;p=1", "abc;p=1", true}, // a raw key is not an sf-item
		{"raw padded", " \tabc \t", "abc", true},
		{"raw max length", long, long, true},
		{"sf-string", `"abc"`, "abc", true},
		{"sf-string with escapes", `"a\"b\\c"`, `a"b\c`, true},
		{"sf-string with comma", `"a,b"`, "a,b", true},
		{"sf-string padded", "  \"k\"\t ", "k", true},
		{"sf-string keeps its spaces", `" abc "`, " abc ", true},
		{"sf-string max length", `"` + long + `"`, long, true},
		{"sf-string max length after unescaping", `"\\` + long[1:] + `"`, `\` + long[1:], true},

		{"empty", "", "", false},
		{"only whitespace", " \t ", "", false},
		{"raw too long", long + "k", "", false},
		{"raw list", "a,b", "", false},
		{"raw quote", `a"b`, "", false},
		{"raw control", "a\x01b", "", false},
		{"raw inner tab", "a\tb", "", false},
		{"raw DEL", "a\x7fb", "", false},
		{"raw non-ASCII", "caf\u00e9", "", false},
		{"empty sf-string", `""`, "", false},
		{"sf-string too long", `"` + long + `k"`, "", false},
		{"unterminated", `"abc`, "", false},
		{"unterminated after escape", `"abc\"`, "", false},
		{"lone backslash", `"\`, "", false},
		{"bad escape", `"a\nb"`, "", false},
		{"inner quote", `"a"b"`, "", false},
		{"parameter", `"abc";p=1`, "abc", true},
		{"parameters of every kind", `"abc"; a;b=1;c=-1.5;d="x\"y";e=tok/en:1;f=:aGk=:;g=?0;h=@1700000000;i=%"caf%c3%a9";*j`, "abc", true},
		{"parameters after spaces", `"abc";p=1 `, "abc", true},
		{"empty parameter", `"abc";`, "", false},
		{"parameter key in capitals", `"abc";P=1`, "", false},
		{"parameter without a value after =", `"abc";p=`, "", false},
		{"space before the parameters", `"abc" ;p=1`, "", false},
		{"decimal with four places", `"abc";p=1.2345`, "", false},
		{"integer of 16 digits", `"abc";p=1234567890123456`, "", false},
		{"unterminated string parameter", `"abc";p="x`, "", false},
		{"bad boolean", `"abc";p=?2`, "", false},
		{"display string in capitals", `"abc";p=%"%C3%A9"`, "", false},
		{"display string with a backslash", `"abc";p=%"a\b"`, "abc", true},
		{"display string of bad UTF-8", `"abc";p=%"%ff"`, "", false},
		{"display string of a cut UTF-8", `"abc";p=%"%c3"`, "", false},
		{"display string of a surrogate", `"abc";p=%"%ed%a0%80"`, "", false},
		{"byte sequence without padding", `"abc";p=:aGk:`, "abc", true},
		{"byte sequence of one character", `"abc";p=:a:`, "", false},
		{"byte sequence padding first", `"abc";p=:=abc:`, "", false},
		{"byte sequence padding inside", `"abc";p=:ab=c:`, "", false},
		{"empty byte sequence", `"abc";p=::`, "abc", true},
		{"date with a fraction", `"abc";p=@1.5`, "", false},
		{"parameter then junk", `"abc";p=1 x`, "", false},
		{"list of sf-strings", `"a", "b"`, "", false},
		{"tab in sf-string", "\"a\tb\"", "", false},
		{"non-ASCII in sf-string", "\"caf\u00e9\"", "", false},
		{"non-ASCII after escape", "\"a\\\"\u00e9\"", "", false},
	}
}()

type parseKeyTest struct {
	name, in, want string
	ok             bool
}

func TestParseKey(t *testing.T) {
	for _, tt := range parseKeyTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("ParseKey(%q) = %q, %v; want %q ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
			var ke KeyError
			if err != nil && (!errors.As(err, &ke) || ke == "") {
				t.Errorf("ParseKey(%q): error %v is not a KeyError with a reason", tt.in, err)
			}
		})
	}
}

func TestParseKeyFields(t *testing.T) {
	if _, err := ParseKeyFields(nil); err != ErrNoKey {
		t.Errorf("no field: %v, want ErrNoKey", err)
	}
	if k, err := ParseKeyFields([]string{`"k"`}); err != nil || k != "k" {
		t.Errorf("one field: %q, %v", k, err)
	}
	for _, vv := range [][]string{{"a", "b"}, {"a", "a"}} {
		var ke KeyError
		if _, err := ParseKeyFields(vv); !errors.As(err, &ke) {
			t.Errorf("fields %q: %v, want a KeyError", vv, err)
		}
	}
}

func TestFormatKey(t *testing.T) {
	tests := []struct {
		key        string
		structured bool
		want       string
	}{
		{"abc", false, "abc"},
		{"abc", true, `"abc"`},
		{`a"b\c`, true, `"a\"b\\c"`},
		{`a\b`, false, `a\b`},
		{`a"b`, false, `"a\"b"`},
		{"a,b", false, `"a,b"`},
		{" a", false, `" a"`},
		{"a ", false, `"a "`},
		{"a b", false, "a b"},
	}
	for _, tt := range tests {
		if got := FormatKey(tt.key, tt.structured); got != tt.want {
			t.Errorf("FormatKey(%q, %v) = %q, want %q", tt.key, tt.structured, got, tt.want)
		}
	}
}

// FuzzParseKey checks the grammar's invariants on any input: a key it
// returns is valid, and formatting that key, raw or structured, gives a
// value that parses back to it; an sf-string formats back to itself.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"abc", `"abc"`, `"a\"b"`, `"`, `""`, `"\`, `"a\x"`, "a,b", `a"b`, `"a,b"`,
		`a\b`, " abc", `" abc"`, `"abc" `, `"abc";p=1`, "\t", strings.Repeat("k", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := ParseKey(in)
		if err != nil {
			var ke KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("ParseKey(%q): error %v is not a KeyError", in, err)
			}
			return
		}
		if err := ValidKey(k); err != nil {
			t.Fatalf("ParseKey(%q) = %q, which ValidKey refuses: %v", in, k, err)
		}
		for _, structured := range []bool{false, true} {
			if k2, err := ParseKey(FormatKey(k, structured)); err != nil || k2 != k {
				t.Fatalf("ParseKey(FormatKey(%q, %v)) = %q, %v", k, structured, k2, err)
			}
		}
		// An sf-string formats back to itself, parameters aside.
		if v := trimOWS(in); v[0] == '"' {
			q := FormatKey(k, true)
			if rest, ok := strings.CutPrefix(v, q); !ok || (rest != "" && rest[0] != ';') {
				t.Fatalf("sf-string %q decodes to %q, which formats to %q", v, k, q)
			}
		}
	})
}

// FuzzValidKey checks that every valid key survives both wire forms.
func FuzzValidKey(f *testing.F) {
	for _, s := range []string{"a", " a", "a ", `"`, ",", `\`, "\x7f", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if ValidKey(key) != nil {
			return
		}
		for _, structured := range []bool{false, true} {
			if k, err := ParseKey(FormatKey(key, structured)); err != nil || k != key {
				t.Fatalf("ParseKey(FormatKey(%q, %v)) = %q, %v", key, structured, k, err)
			}
		}
	})
}

func TestKeyHeaderValues(t *testing.T) {
	for _, c := range []struct {
		h    map[string][]string
		want []string
		err  bool
	}{
		{nil, nil, false},
		{map[string][]string{"Content-Type": {"a"}}, nil, false},
		{map[string][]string{HeaderKey: {"k"}}, []string{"k"}, false},
		{map[string][]string{"idempotency-key": {"k"}}, nil, true},
		{map[string][]string{"IDEMPOTENCY-KEY": {"k"}, HeaderKey: {"k"}}, nil, true},
		{map[string][]string{"X-Idempotency-Key": {"k"}}, nil, false},
	} {
		got, err := KeyHeaderValues(c.h)
		if (err != nil) != c.err || len(got) != len(c.want) || len(got) > 0 && got[0] != c.want[0] {
			t.Errorf("KeyHeaderValues(%v) = %q, %v; want %q, error %v", c.h, got, err, c.want, c.err)
		}
	}
}

// TestParseKeyRawEveryByte holds ParseKey of a raw key to its rules one
// byte at a time, whatever checks it makes eight at a time: every byte
// value at every place of keys as long as a word and around it, a UUID's
// 36 bytes and the limit of 255, is taken or refused with the error
// ParseKey gives it one byte at a time: the first comma or double quote,
// else the first byte outside printable ASCII, or the length over the
// limit.
func TestParseKeyRawEveryByte(t *testing.T) {
	// want is ParseKey of v, a raw value with no space or tab at either
	// end: its rules as they read one byte at a time.
	want := func(v string) (string, error) {
		switch i := strings.IndexAny(v, `",`); {
		case i >= 0 && v[i] == ',':
			return "", errList
		case i >= 0:
			return "", errRawQuote
		}
		if err := ValidKey(v); err != nil {
			return "", err
		}
		return v, nil
	}
	for _, n := range []int{1, 2, 7, 8, 9, 15, 16, 17, 24, 36, 254, 255, 256} {
		for i := range n {
			for c := range 256 {
				b := []byte(strings.Repeat("k", n))
				b[i] = byte(c)
				v := string(b)
				if trimOWS(v) != v || v[0] == '"' {
					continue // not a raw value as it stands
				}
				wk, werr := want(v)
				if k, err := ParseKey(v); k != wk || err != werr {
					t.Fatalf("ParseKey of %d bytes with %#02x at %d = %q, %v; want %q, %v", n, c, i, k, err, wk, werr)
				}
			}
		}
	}
}

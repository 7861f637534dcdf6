package contract

import (
	"regexp"
	"strings"
	"testing"
)

var keyPattern = regexp.MustCompile(KeyPattern)

// keyPatternCases are values on either side of every rule of the grammar,
// beyond those of TestParseKey.
var keyPatternCases = []string{
	" ", "a", " a ", "\ta\t", "a ", `"a" `, `"a"` + "\t", `"a";p=1` + "\t", "a\x00", "\x7e", "\x1f",
	strings.Repeat("k", MaxKeyLen-1) + " k", " " + strings.Repeat("k", MaxKeyLen) + " ",
	`"` + strings.Repeat(`\"`, MaxKeyLen) + `"`, `"` + strings.Repeat(`\"`, MaxKeyLen+1) + `"`,
	`"a";p=:ab=:`, `"a";p=:ab==:`, `"a";p=:abc=:`, `"a";p=:abcd:`, `"a";p=:abcde:`, `"a";p=:a===:`, `"a";p=:ab==ab:`,
	`"a";p=123456789012.123`, `"a";p=1234567890123.1`, `"a";p=123456789012345`, `"a";p=-1`, `"a";p=1.`, `"a";p=.1`,
	`"a";p=@-1`, `"a";p=@1.`, `"a";p=?1`, `"a";p=tok`, `"a";p=*tok`, `"a";p=t:k/1`, `"a";p=\x60`,
	`"a";p=%"%c3%a9"`, `"a";p=%"%e2%82%ac"`, `"a";p=%"%f0%9f%98%80"`, `"a";p=%"%f4%90%80%80"`, `"a";p=%"%c0%80"`,
	`"a";p=%"%e0%80%80"`, `"a";p=%"%c3a"`, `"a";p=%"%c3%c3"`, `"a";p=%"%e2%82"`, `"a";p=%"%41"`, `"a";p=%"%"`, `"a";p=%"%4"`, `"a";p=%"%"%"`,
	`"a";*`, `"a";a_b-c.d*e`, `"a";1`, `"a";;`, `"a";p;q=2`, `"a";  p`, "\"a\";\tp", `"a";p="\\"`, `"a";p="\x"`,
}

// TestKeyPatternAgrees holds KeyPattern to ParseKey on every case of the
// parser's tests and the cases above.
func TestKeyPatternAgrees(t *testing.T) {
	for _, in := range append(parseKeyInputs(), keyPatternCases...) {
		_, err := ParseKey(in)
		if got := keyPattern.MatchString(in); got != (err == nil) {
			t.Errorf("KeyPattern matches %q: %v; ParseKey: %v", in, got, err)
		}
	}
}

// parseKeyInputs are the inputs of TestParseKey.
func parseKeyInputs() []string {
	in := make([]string, 0, len(parseKeyTests))
	for _, tt := range parseKeyTests {
		in = append(in, tt.in)
	}
	return in
}

// FuzzKeyPattern checks that KeyPattern and ParseKey agree on any input.
func FuzzKeyPattern(f *testing.F) {
	for _, s := range append(parseKeyInputs(), keyPatternCases...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		_, err := ParseKey(in)
		if got := keyPattern.MatchString(in); got != (err == nil) {
			t.Fatalf("KeyPattern matches %q: %v; ParseKey: %v", in, got, err)
		}
	})
}

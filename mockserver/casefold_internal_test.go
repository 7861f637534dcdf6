package mockserver

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode"
)

// TestFoldsToMatchesEncodingJSON holds foldsTo to encoding/json itself:
// a name folds to a field's name exactly when encoding/json decodes a
// member of that name into a struct field tagged with it. The names are
// each field's name with one character replaced by every ASCII character
// and every character that has another case, for fields with the letters
// whose case orbits hold characters past ASCII (k and K, s and ſ) and
// those with an i (İ and ı, which encoding/json does not take for one).
func TestFoldsToMatchesEncodingJSON(t *testing.T) {
	var runes []rune
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r < 0x80 || unicode.SimpleFold(r) != r || unicode.ToUpper(r) != r || unicode.ToLower(r) != r {
			runes = append(runes, r)
		}
	}
	runes = append(runes, 0xfffd, 0xd800) // U+D800 is written as invalid UTF-8
	knowns := []string{"amount", "currency", "recipient", "key", "sets", "kiss"}
	var matched int
	for _, known := range knowns {
		typ := reflect.StructOf([]reflect.StructField{{Name: "F", Type: reflect.TypeFor[int](), Tag: reflect.StructTag(`json:"` + known + `"`)}})
		for p := range len(known) {
			for _, r := range runes {
				name := known[:p] + string(r) + known[p+1:]
				key, err := json.Marshal(name)
				if err != nil {
					t.Fatal(err)
				}
				v := reflect.New(typ)
				if err := json.Unmarshal([]byte(`{`+string(key)+`:1}`), v.Interface()); err != nil {
					t.Fatalf("name %q: %v", name, err)
				}
				want := v.Elem().Field(0).Int() == 1
				if got := foldsTo(name, known); got != want {
					t.Errorf("foldsTo(%q, %q) = %v; encoding/json takes it for the field: %v", name, known, got, want)
				}
				if got := foldsTo([]byte(name), known); got != want {
					t.Errorf("foldsTo([]byte(%q), %q) = %v; encoding/json takes it for the field: %v", name, known, got, want)
				}
				if want && name != known {
					matched++
				}
			}
		}
	}
	// Each letter's other case, and K for each k, ſ for each s.
	letters := strings.Join(knowns, "")
	if want := len(letters) + strings.Count(letters, "k") + strings.Count(letters, "s"); matched != want {
		t.Errorf("%d names in another case, want %d", matched, want)
	}
}

func TestCaseVariantOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int
	}{
		{"amount", -1}, {"currency", -1}, {"recipient", -1},
		{"Amount", 0}, {"AMOUNT", 0}, {"amounT", 0}, {"Currency", 1}, {"CURRENCY", 1}, {"reCipient", 2}, {"RECIPIENT", 2},
		{"amounts", -1}, {"amoun", -1}, {"", -1}, {"memo", -1}, {"Amount ", -1}, {" Amount", -1},
		{"rec\u0130pient", -1}, {"rec\u0131pient", -1}, {"\xffmount", -1}, {"\ufffdmount", -1}, {"am\x00unt", -1},
	} {
		if got := caseVariantOf(tc.name); got != tc.want {
			t.Errorf("caseVariantOf(%q) = %d, want %d", tc.name, got, tc.want)
		}
		if got := caseVariantOf([]byte(tc.name)); got != tc.want {
			t.Errorf("caseVariantOf([]byte(%q)) = %d, want %d", tc.name, got, tc.want)
		}
	}
}

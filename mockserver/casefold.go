package mockserver

import (
	"unicode"
	"unicode/utf8"
)

// caseVariantOf returns the index in paymentFields of the member that
// name, a member's name as JSON decodes it, is in another case: equal to
// it as encoding/json matches names to struct fields, without regard to
// case, but not spelled exactly like it ("Amount", "AMOUNT" or "amounT"
// for "amount"). It returns -1 for any other name, and for a member's
// own. A decoder that ignores case (encoding/json into a struct, .NET's
// by default) takes such a member for the one it is a variant of, and
// the last of them for its value, where the server reads only the exact
// name: the two would make different payments of one body.
func caseVariantOf[T string | []byte](name T) int {
	for i, known := range paymentFields {
		if len(name) >= len(known) && string(name) != known && foldsTo(name, known) {
			return i
		}
	}
	return -1
}

// foldsTo reports whether name folds to known, an ASCII name, as
// encoding/json folds a member's name to match it to a struct field (its
// foldName): character by character, ASCII letters to upper case and any
// other character to the smallest of its Unicode simple case folding
// orbit, so that the Kelvin sign K (U+212A) is a "k", the long s ſ
// (U+017F) an "s", but the dotted İ (U+0130) and the dotless ı (U+0131)
// are not an "i". Invalid UTF-8, which encoding/json decodes as U+FFFD, is
// no ASCII letter.
func foldsTo[T string | []byte](name T, known string) bool {
	j := 0
	for _, r := range string(name) {
		if j == len(known) || jsonFoldRune(r) != jsonFoldRune(rune(known[j])) {
			return false
		}
		j++
	}
	return j == len(known)
}

// jsonFoldRune is encoding/json's folding of one character of a name: an
// ASCII letter to upper case; any other character that is not ASCII to
// the smallest of the characters unicode.SimpleFold cycles through from
// it, which for a character of an ASCII letter's orbit (K, ſ) is that
// letter's upper case.
func jsonFoldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

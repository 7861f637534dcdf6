package conformance

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// excerptLen is how much of a body evidence shows.
const excerptLen = 240

// excerpt returns the start of b fit to print: excerptN(b, excerptLen).
func excerpt(b []byte) string { return excerptN(b, excerptLen) }

// excerptN returns the start of b fit to print: at most n bytes of it,
// cut at a character boundary and followed by "…" when cut, quoted
// Go-style when they are not UTF-8.
func excerptN(b []byte, n int) string {
	cut := b
	if len(cut) > n {
		cut = cut[:n]
		for i := 0; i < utf8.UTFMax-1 && !utf8.Valid(cut); i++ {
			cut = cut[:len(cut)-1] // do not split a character
		}
	}
	s := string(cut)
	if !utf8.ValidString(s) {
		s = strconv.Quote(s)
	}
	if len(cut) < len(b) {
		s += "…"
	}
	return s
}

// printable returns s fit for a terminal, on one line: its control
// characters (newlines, tabs, escape sequences, C1 controls) and
// bidirectional formatting characters as Go escapes ("\n", "\x1b",
// "\u202e"), and bytes that are not UTF-8 as "\xff". What a server
// answered reaches the text report only through it.
func printable(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, escaped) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case escaped(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// escaped reports whether printable escapes the character r.
func escaped(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }

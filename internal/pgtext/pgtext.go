// Package pgtext keeps any Go string in a PostgreSQL text column, which
// holds only valid UTF-8 without NUL: Encode gives the form to write and to
// compare with, Decode the string back. pgstore uses it for the scope, key
// and fingerprint of its entries, the outbox's Inbox for the consumer and
// message ID of its rows.
//
// A string of valid UTF-8 without NUL that does not start with Mark is kept
// as it is; any other string is kept as Mark followed by its bytes in hex
// (lowercase). The mapping is injective: an escaped form starts with Mark,
// which no string kept as it is does, so equal columns mean equal strings.
//
// Rows written before a column was encoded hold valid text (the column
// refused anything else), and keep matching their strings, except the rare
// row whose string starts with Mark: Encode escapes that string, so a
// lookup of it no longer finds the row (for the Inbox: a redelivery of
// that message runs its effect again); and when the rest of such a row is
// hex, the row matches the string those digits spell, if that string
// needs escaping (for the Inbox: a message with that ID is taken for a
// duplicate). Decode reads such a row as the string its hex spells, or as
// it is when the rest is not hex.
package pgtext

import (
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// Mark starts the escaped form of a string that a text column cannot hold
// as it is (or that starts with Mark itself).
const Mark = "\x01"

// Encode returns the form in which s is kept in a text column: s itself
// when it is valid UTF-8 without NUL and does not start with Mark, else
// Mark followed by s's bytes in hex. Encode(s) is valid text, at most
// 1 + 2×len(s) bytes long, and Encode(a) == Encode(b) only when a == b.
func Encode(s string) string {
	if plainASCII(s) || utf8.ValidString(s) && !strings.ContainsRune(s, 0) && !strings.HasPrefix(s, Mark) {
		return s
	}
	return Mark + hex.EncodeToString([]byte(s))
}

// Decode reverses Encode. A string that starts with Mark but is not
// followed by hex (Encode writes no such string) is returned as it is.
func Decode(s string) string {
	rest, ok := strings.CutPrefix(s, Mark)
	if !ok {
		return s
	}
	b, err := hex.DecodeString(rest)
	if err != nil {
		return s // not written by Encode: keep what is there
	}
	return string(b)
}

// plainASCII reports whether s is ASCII without NUL and does not start
// with Mark, the usual key, scope and fingerprint, which Encode keeps as
// it is: one pass over s, eight bytes at a time, where the general test
// takes three calls (about a hundred instructions each for a short key).
func plainASCII(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	if len(s) > 0 && s[0] == Mark[0] {
		return false
	}
	for ; len(s) >= 8; s = s[8:] {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		// A byte of 0x80 or more, or a zero byte (which borrows in w-ones
		// and so sets its high bit there while it is clear in w).
		if (w|(w-ones)&^w)&highs != 0 {
			return false
		}
	}
	for i := range len(s) {
		if s[i] == 0 || s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

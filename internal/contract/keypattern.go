package contract

// KeyPattern is the grammar of [ParseKey] as a regular expression, in the
// common subset of ECMA-262 (what JSON Schema's "pattern" uses) and Go's
// regexp syntax: a field value matches it exactly when ParseKey accepts
// it. It is what the OpenAPI description of the Idempotency-Key header
// parameter says (see idempotency.OpenAPI), so that a document and the
// parser cannot drift apart: TestKeyPatternAgrees and FuzzKeyPattern hold
// the two to each other.
//
// The lengths are counted as ParseKey counts them: a raw key has 1 to
// MaxKeyLen characters, and an sf-string 1 to MaxKeyLen characters after
// unquoting (an escape pair is one). The RFC 9651 parameters after an
// sf-string are checked the way ParseKey checks them, down to the base64 of
// a byte sequence and the UTF-8 of a display string.
const KeyPattern = `^[ \t]*(?:` + rawKeyPattern + `|` + sfKeyPattern + `)[ \t]*$`

const (
	// rawKeyPattern: printable ASCII but the double quote and the comma,
	// neither starting nor ending with a space (those are trimmed), 1 to
	// 255 characters.
	rawKeyPattern = `[\x21\x23-\x2B\x2D-\x7E](?:[\x20\x21\x23-\x2B\x2D-\x7E]{0,253}[\x21\x23-\x2B\x2D-\x7E])?`
	// sfChar is one character of an sf-string, an escape pair included.
	sfChar = `(?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\["\\])`
	// sfKeyPattern: an sf-string of 1 to 255 characters, then parameters.
	sfKeyPattern = `"` + sfChar + `{1,255}"(?:;[ ]*[a-z*][a-z0-9_.*-]*(?:=` + bareItemPattern + `)?)*`
	// bareItemPattern is an RFC 9651 bare item: decimal, integer, string,
	// token, byte sequence, boolean, date or display string.
	bareItemPattern = `(?:-?[0-9]{1,12}\.[0-9]{1,3}|-?[0-9]{1,15}|"` + sfChar + `*"` +
		`|[A-Za-z*][!#$%&'*+\-.^_\x60|~0-9A-Za-z:/]*` +
		`|:(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}={0,2}|[A-Za-z0-9+/]{3}=?)?:` +
		`|\?[01]|@-?[0-9]{1,15}|%"(?:[\x20\x21\x23\x24\x26-\x7E]|` + pctUTF8 + `)*")`
	// pctUTF8 is one UTF-8 encoded character as lower-case %xx escapes.
	pctUTF8 = `%[0-7][0-9a-f]` +
		`|%c[2-9a-f]` + pctCont + `|%d[0-9a-f]` + pctCont +
		`|%e0%[ab][0-9a-f]` + pctCont + `|%e[1-9a-cef]` + pctCont + pctCont + `|%ed%[89][0-9a-f]` + pctCont +
		`|%f0%[9ab][0-9a-f]` + pctCont + pctCont + `|%f[1-3]` + pctCont + pctCont + pctCont + `|%f4%8[0-9a-f]` + pctCont + pctCont
	pctCont = `%[89ab][0-9a-f]`
)

package idempotency

import (
	"bytes"
	"errors"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting the canonicaliser follows, so that a
// hostile body cannot exhaust the stack; deeper bodies are fingerprinted as
// raw bytes.
const maxJSONDepth = 512

var errNotJSON = errors.New("idempotency: body is not valid JSON")

// appendCanonicalJSON appends the canonical form of the JSON text src to dst:
// object members sorted by their encoded names (duplicates keep their order),
// no insignificant whitespace, strings re-encoded with the minimal escapes,
// and numbers kept as their literal text. Two texts that decode to the same
// values with the same number spellings give the same bytes, and the mapping
// is injective on everything else. It returns errNotJSON for invalid input.
func appendCanonicalJSON(dst, src []byte) ([]byte, error) {
	c := canonicaliser{src: src, out: dst}
	c.skipSpace()
	if err := c.value(0); err != nil {
		return dst, err
	}
	c.skipSpace()
	if c.pos != len(c.src) {
		return dst, errNotJSON
	}
	return c.out, nil
}

type canonicaliser struct {
	src     []byte
	pos     int
	out     []byte
	scratch []byte
}

func (c *canonicaliser) skipSpace() {
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicaliser) value(depth int) error {
	if c.pos >= len(c.src) {
		return errNotJSON
	}
	switch ch := c.src[c.pos]; {
	case ch == '{':
		if depth >= maxJSONDepth {
			return errNotJSON
		}
		return c.object(depth + 1)
	case ch == '[':
		if depth >= maxJSONDepth {
			return errNotJSON
		}
		return c.array(depth + 1)
	case ch == '"':
		return c.str()
	case ch == '-' || (ch >= '0' && ch <= '9'):
		return c.number()
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	}
	return errNotJSON
}

func (c *canonicaliser) literal(lit string) error {
	if len(c.src)-c.pos < len(lit) || string(c.src[c.pos:c.pos+len(lit)]) != lit {
		return errNotJSON
	}
	c.pos += len(lit)
	c.out = append(c.out, lit...)
	return nil
}

func (c *canonicaliser) number() error {
	start := c.pos
	s := c.src
	i := c.pos
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return errNotJSON
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return errNotJSON
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return errNotJSON
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	c.pos = i
	c.out = append(c.out, s[start:i]...)
	return nil
}

// str decodes a JSON string and appends its canonical encoding.
func (c *canonicaliser) str() error {
	s := c.src
	i := c.pos + 1
	// Fast path: a run without escapes or characters that need them is
	// copied as it is.
	start := i
	for i < len(s) && s[i] != '"' && s[i] != '\\' && s[i] >= 0x20 {
		i++
	}
	if i < len(s) && s[i] == '"' {
		c.out = append(c.out, s[c.pos:i+1]...)
		c.pos = i + 1
		return nil
	}
	c.out = append(c.out, '"')
	c.out = append(c.out, s[start:i]...)
	for i < len(s) {
		ch := s[i]
		switch {
		case ch == '"':
			c.out = append(c.out, '"')
			c.pos = i + 1
			return nil
		case ch < 0x20:
			return errNotJSON
		case ch != '\\':
			c.out = append(c.out, ch)
			i++
			continue
		}
		// An escape.
		if i+1 >= len(s) {
			return errNotJSON
		}
		e := s[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			c.appendByte(e)
		case 'b':
			c.appendByte('\b')
		case 'f':
			c.appendByte('\f')
		case 'n':
			c.appendByte('\n')
		case 'r':
			c.appendByte('\r')
		case 't':
			c.appendByte('\t')
		case 'u':
			r, ok := hex4(s, i)
			if !ok {
				return errNotJSON
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r < 0xdc00 && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if r2, ok := hex4(s, i+2); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
						c.out = utf8.AppendRune(c.out, utf16.DecodeRune(r, r2))
						i += 6
						continue
					}
				}
				// A lone surrogate has no UTF-8 form: keep it as an escape,
				// spelled in lower case, which no decoded character can
				// produce.
				c.out = append(c.out, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
				continue
			}
			if r < 0x80 {
				c.appendByte(byte(r))
			} else {
				c.out = utf8.AppendRune(c.out, r)
			}
		default:
			return errNotJSON
		}
	}
	return errNotJSON
}

const hexDigits = "0123456789abcdef"

// appendByte appends one decoded ASCII byte with the canonical escape where
// JSON needs one.
func (c *canonicaliser) appendByte(b byte) {
	switch b {
	case '"':
		c.out = append(c.out, '\\', '"')
	case '\\':
		c.out = append(c.out, '\\', '\\')
	case '\b':
		c.out = append(c.out, '\\', 'b')
	case '\f':
		c.out = append(c.out, '\\', 'f')
	case '\n':
		c.out = append(c.out, '\\', 'n')
	case '\r':
		c.out = append(c.out, '\\', 'r')
	case '\t':
		c.out = append(c.out, '\\', 't')
	default:
		if b < 0x20 {
			c.out = append(c.out, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			return
		}
		c.out = append(c.out, b)
	}
}

func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, ch := range s[i : i+4] {
		var d byte
		switch {
		case ch >= '0' && ch <= '9':
			d = ch - '0'
		case ch >= 'a' && ch <= 'f':
			d = ch - 'a' + 10
		case ch >= 'A' && ch <= 'F':
			d = ch - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

func (c *canonicaliser) array(depth int) error {
	c.pos++ // '['
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for {
		c.skipSpace()
		if err := c.value(depth); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos >= len(c.src) {
			return errNotJSON
		}
		switch c.src[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return nil
		default:
			return errNotJSON
		}
	}
}

// member locates one encoded object member in c.out: the name is
// out[start:colon] and the value out[colon+1:end].
type member struct{ start, colon, end int }

func (c *canonicaliser) object(depth int) error {
	c.pos++ // '{'
	c.out = append(c.out, '{')
	base := len(c.out)
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		return nil
	}
	var stack [8]member
	members := stack[:0]
	for {
		c.skipSpace()
		if c.pos >= len(c.src) || c.src[c.pos] != '"' {
			return errNotJSON
		}
		m := member{start: len(c.out)}
		if err := c.str(); err != nil {
			return err
		}
		m.colon = len(c.out)
		c.skipSpace()
		if c.pos >= len(c.src) || c.src[c.pos] != ':' {
			return errNotJSON
		}
		c.pos++
		c.out = append(c.out, ':')
		c.skipSpace()
		if err := c.value(depth); err != nil {
			return err
		}
		m.end = len(c.out)
		members = append(members, m)
		c.skipSpace()
		if c.pos >= len(c.src) {
			return errNotJSON
		}
		if c.src[c.pos] == '}' {
			c.pos++
			break
		}
		if c.src[c.pos] != ',' {
			return errNotJSON
		}
		c.pos++
		c.out = append(c.out, ',')
	}
	if len(members) > 1 {
		out := c.out
		name := func(m member) []byte { return out[m.start:m.colon] }
		cmp := func(a, b member) int { return bytes.Compare(name(a), name(b)) }
		if !slices.IsSortedFunc(members, cmp) {
			slices.SortStableFunc(members, cmp)
			c.scratch = append(c.scratch[:0], out[base:]...)
			w := base
			for i, m := range members {
				if i > 0 {
					out[w] = ','
					w++
				}
				w += copy(out[w:], c.scratch[m.start-base:m.end-base])
			}
		}
	}
	c.out = append(c.out, '}')
	return nil
}

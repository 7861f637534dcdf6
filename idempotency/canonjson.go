package idempotency

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"slices"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting the canonicaliser follows, so that a
// hostile body cannot exhaust the stack; deeper bodies are fingerprinted as
// raw bytes.
const maxJSONDepth = 512

var errNotJSON = errors.New("idempotency: body is not valid JSON")

// appendCanonicalJSON appends the canonical form of the JSON text src to dst:
// object members sorted by their encoded names (duplicates and case variants
// keep their order: see sortMembers), no insignificant whitespace, strings
// re-encoded with the minimal escapes, and numbers kept as their literal
// text. Two texts that decode to the same values with the same number
// spellings give the same bytes, and the mapping is injective on everything
// else. It returns errNotJSON for invalid input.
func appendCanonicalJSON(dst, src []byte) ([]byte, error) {
	var c canonicaliser
	if err := c.read(src); err != nil {
		return dst, err
	}
	s := sink{b: dst}
	c.emit(&s)
	return s.b, nil
}

// sink collects what emit writes: in b, and, when w is set, on to w each
// time b fills up, so that the many short pieces of a reordered object reach
// w in few calls. Call flush at the end.
type sink struct {
	w io.Writer // nil: b grows to hold everything
	b []byte
}

func (s *sink) write(p []byte) {
	if len(s.b)+len(p) > cap(s.b) && s.w != nil {
		s.spill(p)
		return
	}
	s.b = append(s.b, p...)
}

// spill writes what b holds and p to w.
func (s *sink) spill(p []byte) {
	s.flush()
	if len(p) >= cap(s.b)/2 {
		_, _ = s.w.Write(p)
		return
	}
	s.b = append(s.b, p...)
}

func (s *sink) writeByte(c byte) {
	if len(s.b) == cap(s.b) && s.w != nil {
		s.flush()
	}
	s.b = append(s.b, c)
}

func (s *sink) flush() {
	if s.w != nil && len(s.b) > 0 {
		_, _ = s.w.Write(s.b)
		s.b = s.b[:0]
	}
}

// canonicaliser reads a JSON text in one pass and then writes its canonical
// form (see appendCanonicalJSON). The pass writes the canonical text of
// every token to out, which has the canonical form's length. A token
// whose canonical text is its text (punctuation, numbers, literals, the
// runs of strings between escapes) is not copied on its own: out lags src
// by a run of such text, src[run:pos], copied in one piece when the pass
// reaches something else (whitespace, an escape) or needs the names of an
// object's members in out (see flush); positions in out count that run
// (see outLen). An object
// whose members are out of order is put in order where it lies when none of
// its members holds an object (rewrite); otherwise the pass records its
// members in canonical order, and emit writes them from where they lie. So
// a byte moves at most once, whatever the depth: rewriting the objects
// around objects would move their subtrees again at every level.
//
// A canonicaliser keeps its buffers between uses; it is not safe for
// concurrent use.
type canonicaliser struct {
	src   []byte
	pos   int
	run   int // src[run:pos] is canonical text not yet copied to out
	out   []byte
	class uint8 // of the last string: see str

	stack   []member // the members of the objects being read, innermost last
	objs    []object // the objects emit must look into, in input order
	order   []span   // each reordered object's members, in canonical order
	objects int      // the objects with members read so far
	scratch []byte   // a copy of the object rewrite reorders

	// Scratch space of foldCollision: the fold keys and a copy of the
	// members of the object being checked for case variants.
	keys  []uint64
	spare []member
}

// member is one object member in out, as the object's members are sorted:
// its name is out[start:colon], key the name's first 16 bytes after the
// opening quote (see nameKey), and span where it lies.
type member struct {
	span
	colon int
	key   [2]uint64
}

// span is the text of one member, out[start:end]; objs[objLo:objHi] are the
// objects in its value that emit must look into.
type span struct{ start, end, objLo, objHi int }

// object is an object in out from its '{' at start to its '}' before end,
// that emit must look into: its members are out of order (order[first:last]
// are them in canonical order), or, when first is -1, one of the objects
// inside it is. objs[next] is the first object after it.
type object struct{ start, end, next, first, last int }

// read reads the JSON text src, readying c to emit its canonical form. It
// returns errNotJSON for invalid input.
func (c *canonicaliser) read(src []byte) error {
	c.src, c.pos, c.run = src, 0, 0
	// The canonical form is never longer than src, and nameKey loads
	// up to 16 bytes past a name: with this room out never grows.
	if cap(c.out) < len(src)+16 {
		c.out = make([]byte, 0, len(src)+16)
	}
	c.out, c.stack, c.objs, c.order, c.objects = c.out[:0], c.stack[:0], c.objs[:0], c.order[:0], 0
	c.skipSpace()
	err := c.value(0)
	c.skipSpace()
	c.flush()
	c.src = nil // not kept past the call
	if err == nil && c.pos != len(src) {
		err = errNotJSON
	}
	return err
}

// outLen is the length of the canonical form of src[:pos]: out and the
// run that it lags by.
func (c *canonicaliser) outLen() int { return len(c.out) + c.pos - c.run }

// flush copies to out the run of canonical text it lags by.
func (c *canonicaliser) flush() {
	c.out = append(c.out, c.src[c.run:c.pos]...)
	c.run = c.pos
}

// canonicalLen is the length of the canonical form read.
func (c *canonicaliser) canonicalLen() int { return len(c.out) }

// emit writes the canonical form read to s.
func (c *canonicaliser) emit(s *sink) {
	if len(c.objs) == 0 && s.w != nil {
		s.flush()
		_, _ = s.w.Write(c.out) // in order throughout: out is the canonical form
		return
	}
	c.emitRange(s, 0, len(c.out), 0, len(c.objs))
	s.flush()
}

// emitRange writes the canonical form of out[lo:hi], inside which
// objs[k:kEnd] are the objects to look into.
func (c *canonicaliser) emitRange(s *sink, lo, hi, k, kEnd int) {
	for k < kEnd {
		o := c.objs[k]
		s.write(c.out[lo:o.start])
		if o.first < 0 {
			c.emitRange(s, o.start, o.end, k+1, o.next)
		} else {
			s.writeByte('{')
			for i, m := range c.order[o.first:o.last] {
				if i > 0 {
					s.writeByte(',')
				}
				if m.objLo == m.objHi {
					s.write(c.out[m.start:m.end])
				} else {
					c.emitRange(s, m.start, m.end, m.objLo, m.objHi)
				}
			}
			s.writeByte('}')
		}
		lo, k = o.end, o.next
	}
	s.write(c.out[lo:hi])
}

// oversized reports whether c holds more buffer space than is worth keeping
// in a pool: more than the largest request body the Middleware reads by
// default needs, with room to spare.
func (c *canonicaliser) oversized() bool {
	const limit = 4 * int(DefaultMaxRequestBody) // bytes
	const memberSize, spanSize, objectSize = 7 * 8, 4 * 8, 5 * 8
	return cap(c.out) > limit || cap(c.scratch) > limit || (cap(c.stack)+cap(c.spare))*memberSize+cap(c.order)*spanSize+cap(c.objs)*objectSize+cap(c.keys)*8 > limit
}

func (c *canonicaliser) skipSpace() {
	if c.pos < len(c.src) && c.src[c.pos] > ' ' {
		return // the common case: no space at all
	}
	c.skipSpaceRun()
}

// skipSpaceRun skips the whitespace at pos, if any, ending the run of
// canonical text out lags by there. It is not inlined, so that skipSpace,
// called around every token, is.
//
//go:noinline
func (c *canonicaliser) skipSpaceRun() {
	i := c.pos
	for i < len(c.src) && (c.src[i] == ' ' || c.src[i] == '\t' || c.src[i] == '\n' || c.src[i] == '\r') {
		i++
	}
	if i > c.pos {
		c.flush()
		c.pos, c.run = i, i
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
	c.pos += len(lit) // canonical as it is: part of the run
	return nil
}

func (c *canonicaliser) number() error {
	s, i := c.src, c.pos
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = digits(s, i)
	default:
		return errNotJSON
	}
	if i < len(s) && s[i] == '.' {
		if i = digits(s, i+1); s[i-1] == '.' {
			return errNotJSON
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(s, i)
		if j == i {
			return errNotJSON
		}
		i = j
	}
	c.pos = i // canonical as it is: part of the run
	return nil
}

// digits returns the index of the first byte from s[i] that is not a
// decimal digit.
func digits(s []byte, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// str decodes a JSON string and appends its canonical encoding. It sets
// c.class to the union of the classes of the string's bytes (see strByte),
// or to nameSpecial if the string holds an escape.
func (c *canonicaliser) str() error {
	s := c.src
	i, class := plainRun(s, c.pos+1)
	if i < len(s) && s[i] == '"' {
		// No escapes, nor characters that need them: canonical as it
		// is, part of the run.
		c.pos, c.class = i+1, class
		return nil
	}
	c.class = nameSpecial
	for i < len(s) {
		switch s[i] { // a byte plainRun stops at
		case '"':
			c.pos = i + 1
			return nil
		case '\\':
			c.pos = i
			c.flush() // up to the escape, which is written decoded
			next, ok := c.escape(i)
			if !ok {
				return errNotJSON
			}
			i, c.pos, c.run = next, next, next
		default:
			return errNotJSON // a control character
		}
		i, _ = plainRun(s, i)
	}
	return errNotJSON
}

// appendSpan appends s[from:to] to dst. A span of up to 16 bytes, with 16
// bytes of s from its start and 16 bytes of room in dst, moves as two
// 8-byte words, whose bytes past it land in dst's spare capacity, rather
// than through memmove's call: most strings and numbers are that short.
func appendSpan(dst, s []byte, from, to int) []byte {
	n := len(dst)
	if to-from > 16 || len(s)-from < 16 || cap(dst)-n < 16 {
		return append(dst, s[from:to]...)
	}
	w, d := s[from:from+16], dst[n:n+16]
	binary.LittleEndian.PutUint64(d, binary.LittleEndian.Uint64(w))
	binary.LittleEndian.PutUint64(d[8:], binary.LittleEndian.Uint64(w[8:]))
	return dst[:n+to-from]
}

// plainRun returns the index of the first byte from s[i] that str cannot
// copy as it is (see strStop), and the union of the classes of the bytes
// before it. It reads 8 bytes at a time while they are ASCII, and looks
// at the rest, and at a word with a non-ASCII byte, a byte at a time.
func plainRun(s []byte, i int) (int, uint8) {
	var class uint8
	for i+8 <= len(s) {
		w := binary.LittleEndian.Uint64(s[i:])
		if w&wordHigh != 0 {
			break // a non-ASCII byte: nameSpecial, taken below
		}
		// Every byte is below 0x80, so that adding to each byte carries
		// into none of the others: a byte's high bit tells its class.
		stop := (^(w + (0x80-0x20)*wordLow) | wordEq(w, '"') | wordEq(w, '\\')) & wordHigh
		upper := (w + (0x80-'A')*wordLow) &^ (w + (0x80-'Z'-1)*wordLow) & wordHigh
		if stop != 0 {
			n := bits.TrailingZeros64(stop) / 8 // the bytes before the first stop
			if upper&(1<<(8*n)-1) != 0 {
				class |= nameUpper
			}
			return i + n, class
		}
		if upper != 0 {
			class |= nameUpper
		}
		i += 8
	}
	for i < len(s) {
		b := strByte[s[i]]
		if b&strStop != 0 {
			break
		}
		class |= b
		i++
	}
	return i, class
}

// Each byte of a word of 8 (see plainRun).
const (
	wordLow  = 0x0101010101010101 // its lowest bit
	wordHigh = 0x8080808080808080 // its highest
)

// wordEq returns w with the high bit of each byte set where that byte is
// c and clear elsewhere, for w's bytes and c below 0x80.
func wordEq(w uint64, c byte) uint64 {
	x := w ^ uint64(c)*wordLow // 0 where equal, below 0x80 everywhere
	return ^(x + 0x7f*wordLow)
}

// escape decodes the escape at src[i] (a backslash) and appends its
// canonical form; it returns the index after the escape, or false for an
// invalid one.
func (c *canonicaliser) escape(i int) (int, bool) {
	s := c.src
	if i+1 >= len(s) {
		return 0, false
	}
	e := s[i+1]
	if e == 'u' {
		return c.unicodeEscape(i + 2)
	}
	b := unescaped[e]
	if b == 0 {
		return 0, false
	}
	c.appendByte(b)
	return i + 2, true
}

// unicodeEscape decodes the \uXXXX escape whose digits start at src[i],
// joining a surrogate pair; it returns the index after it.
func (c *canonicaliser) unicodeEscape(i int) (int, bool) {
	s := c.src
	r, ok := hex4(s, i)
	if !ok {
		return 0, false
	}
	i += 4
	if utf16.IsSurrogate(r) {
		if r < 0xdc00 && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
			if r2, ok := hex4(s, i+2); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
				c.out = utf8.AppendRune(c.out, utf16.DecodeRune(r, r2))
				return i + 6, true
			}
		}
		// A lone surrogate has no UTF-8 form: keep it as an escape,
		// spelled in lower case, which no decoded character can produce.
		c.out = append(c.out, '\\', 'u', hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		return i, true
	}
	if r < 0x80 {
		c.appendByte(byte(r))
	} else {
		c.out = utf8.AppendRune(c.out, r)
	}
	return i, true
}

const hexDigits = "0123456789abcdef"

// appendByte appends one decoded ASCII byte with the canonical escape where
// JSON needs one.
func (c *canonicaliser) appendByte(b byte) {
	switch {
	case shortEscape[b] != 0:
		c.out = append(c.out, '\\', shortEscape[b])
	case b < 0x20:
		c.out = append(c.out, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
	default:
		c.out = append(c.out, b)
	}
}

// unescaped maps the letter of each short JSON escape (\" \\ \/ \b \f \n
// \r \t) to the byte it stands for; shortEscape maps back the bytes that a
// canonical string escapes so. A zero is no such escape.
var (
	unescaped   = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}
	shortEscape = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}
)

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

// open passes the bracket that opens a container, at src[pos], and
// reports whether the container is empty: then its closing bracket, which
// is closing, is passed too. Both stay in the run (see canonicaliser).
func (c *canonicaliser) open(closing byte) (empty bool) {
	c.pos++
	c.skipSpace()
	if c.pos < len(c.src) && c.src[c.pos] == closing {
		c.pos++
		return true
	}
	return false
}

func (c *canonicaliser) array(depth int) error {
	if c.open(']') {
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
		case ']':
			c.pos++
			return nil
		default:
			return errNotJSON
		}
	}
}

func (c *canonicaliser) object(depth int) error {
	start := c.outLen()
	if c.open('}') {
		return nil
	}
	self, base, inner := len(c.objs), len(c.stack), c.objects
	c.objs = append(c.objs, object{start: start, first: -1})
	class, err := c.members(depth)
	if err != nil {
		return err
	}
	members := c.stack[base:]
	o := &c.objs[self]
	if len(members) > 1 {
		c.flush() // sortMembers reads names in out, rewrite moves them
	}
	if len(members) > 1 && c.sortMembers(members, class) {
		if c.objects == inner {
			// No object inside: its bytes move now, and never again, as
			// every object around it holds an object.
			c.rewrite(start+1, members)
		} else {
			o.first = len(c.order)
			for _, m := range members {
				c.order = append(c.order, m.span)
			}
			o.last = len(c.order)
		}
	}
	c.objects++
	c.pos++ // the '}' that members stopped at
	c.stack = c.stack[:base]
	if o.first < 0 && len(c.objs) == self+1 {
		c.objs = c.objs[:self] // in order, and so is everything inside
		return nil
	}
	o.end, o.next = c.outLen(), len(c.objs)
	return nil
}

// rewrite rewrites the members of an object from c.out[base] in the order
// of members.
func (c *canonicaliser) rewrite(base int, members []member) {
	// The copy takes the 16 bytes past the object too, where out has
	// them (read leaves room), so that appendSpan can move short members
	// as words; their bytes past the object land in out's spare capacity.
	c.scratch = append(c.scratch[:0], c.out[base:min(len(c.out)+16, cap(c.out))]...)
	out := c.out[:base]
	for i := range members {
		m := &members[i]
		if i > 0 {
			out = append(out, ',')
		}
		out = appendSpan(out, c.scratch, m.start-base, m.end-base)
	}
}

// members reads an object's members up to its closing brace, where it
// stops, pushing them on c.stack, and returns the union of the classes of
// their names' bytes.
func (c *canonicaliser) members(depth int) (class uint8, err error) {
	for {
		c.skipSpace()
		if c.pos >= len(c.src) || c.src[c.pos] != '"' {
			return 0, errNotJSON
		}
		m := member{span: span{start: c.outLen(), objLo: len(c.objs)}}
		at := c.pos
		if err := c.str(); err != nil {
			return 0, err
		}
		class |= c.class
		m.colon = c.outLen()
		if c.run <= at && len(c.src)-at > 16 {
			// The name is in the run, as it is in src: its key is there.
			m.key = nameKey(c.src, at+1, c.pos)
		} else {
			c.flush()
			if cap(c.out)-len(c.out) < 16 {
				c.out = slices.Grow(c.out, 16) // for nameKey's load; read leaves room
			}
			m.key = nameKey(c.out, m.start+1, m.colon)
		}
		c.skipSpace()
		if c.pos >= len(c.src) || c.src[c.pos] != ':' {
			return 0, errNotJSON
		}
		c.pos++
		c.skipSpace()
		if err := c.value(depth); err != nil {
			return 0, err
		}
		m.end, m.objHi = c.outLen(), len(c.objs)
		c.stack = append(c.stack, m)
		c.skipSpace()
		if c.pos >= len(c.src) {
			return 0, errNotJSON
		}
		switch c.src[c.pos] {
		case '}':
			return class, nil
		case ',':
			c.pos++
		default:
			return 0, errNotJSON
		}
	}
}

// sortMembers puts members, those of one object, in canonical order and
// reports whether that changed their order; class is the union of the
// classes of the bytes of their names (see strByte).
//
// A decoder reads a member order in two ways only: a case-sensitive one
// cares about the order of members with the same name (which duplicate
// wins), and a case-insensitive one, as encoding/json is for struct fields,
// about the order of members whose names are equal under case folding (the
// last match wins). The order within each fold class, the members whose
// names fold equal, must therefore survive, and the order across classes may
// be anything deterministic.
//
// The v1 order, a stable sort by encoded name, keeps it exactly when no two
// different names of the object fold equal, as each class then holds one
// name; it stays the order of such objects, so that their stored v1
// fingerprints remain valid. An object with such a pair is sorted stably by
// folded name instead, which keeps every class in input order. So in both
// cases the canonical text lists each class's members in their input order,
// and two bodies with the same canonical text are read the same by every
// decoder of either kind: the mapping stays injective on what decoders see.
// A body with a fold collision cannot share its text with one without:
// whether an object has one depends only on its names, which the canonical
// text spells out (an injective encoding of the decoded names), so equal
// texts have equal names and were sorted by the same rule.
//
// Ties, which a stable sort would leave in input order, are broken by
// position, to the same effect.
func (c *canonicaliser) sortMembers(members []member, class uint8) bool {
	out := c.out
	if class != 0 && c.foldCollision(members, class&nameSpecial == 0) {
		byFolded := func(a, b member) int {
			if r := compareFolded(nameText(out, a), nameText(out, b)); r != 0 {
				return r
			}
			return cmp.Compare(a.start, b.start)
		}
		if slices.IsSortedFunc(members, byFolded) {
			return false
		}
		slices.SortFunc(members, byFolded)
		return true
	}
	if len(members) <= 12 {
		return insertionSort(out, members)
	}
	byName := func(a, b member) int {
		if nameLess(out, &a, &b) {
			return -1
		}
		if nameLess(out, &b, &a) {
			return 1
		}
		return cmp.Compare(a.start, b.start)
	}
	if slices.IsSortedFunc(members, byName) {
		return false
	}
	slices.SortFunc(members, byName)
	return true
}

// insertionSort sorts the few members (at most 12) of an object stably by
// name and reports whether that changed their order. It moves a member
// only when it is out of place, past those it sorts before.
func insertionSort(out []byte, members []member) bool {
	changed := false
	for i := 1; i < len(members); i++ {
		if !nameLess(out, &members[i], &members[i-1]) {
			continue
		}
		m, j := members[i], i-1
		for j > 0 && nameLess(out, &m, &members[j-1]) {
			j--
		}
		for k := i; k > j; k-- { // a few members: not worth memmove's call
			members[k] = members[k-1]
		}
		members[j] = m
		changed = true
	}
	return changed
}

// nameLess reports whether a's name sorts before b's: by their keys, then,
// for names longer than a key, by their bytes.
func nameLess(out []byte, a, b *member) bool {
	if a.key[0] != b.key[0] {
		return a.key[0] < b.key[0]
	}
	if a.key[1] != b.key[1] {
		return a.key[1] < b.key[1]
	}
	return a.colon-a.start > len(a.key)*8+1 && bytes.Compare(out[a.start:a.colon], out[b.start:b.colon]) < 0
}

// nameKey returns the first 16 bytes of out[from:to], a name's encoding
// after its opening quote, as two big-endian numbers, padded with zero bytes: names
// with different keys compare as their keys do, and names with the same key
// are the same name when it holds the whole of one of them. No name's text
// is a proper prefix of another's, as each ends with the only unescaped
// quote it holds, and none holds a zero byte (it is escaped), so the padding
// cannot make two different names' keys equal or compare in the wrong
// order.
//
// It loads 16 bytes from out[from], past the name if need be, which
// out's capacity must hold (members makes room).
func nameKey(out []byte, from, to int) [2]uint64 {
	w := out[from : from+16 : from+16]
	m := &keyMasks[min(uint(to-from), 16)]
	return [2]uint64{binary.BigEndian.Uint64(w) & m[0], binary.BigEndian.Uint64(w[8:]) & m[1]}
}

// keyMasks[n] keeps the first n bytes of a key.
var keyMasks = func() (m [17][2]uint64) {
	for n := range m {
		m[n][0] = ^(^uint64(0) >> (8 * uint(min(n, 8))))
		m[n][1] = ^(^uint64(0) >> (8 * uint(min(max(n-8, 0), 8))))
	}
	return m
}()

// nameText returns the canonical encoding of m's name without its quotes.
func nameText(out []byte, m member) []byte { return out[m.start+1 : m.colon-1] }

// foldCollision reports whether two members have different names that are
// equal under case folding; ascii reports that the names are ASCII without
// escapes. It runs on every object whose names are not all lower-case ASCII
// (those cannot collide: folding maps them one to one), so the common
// objects are settled by a key per name that case variants share: only
// equal keys (from a duplicate name, a case variant or a clash) lead to the
// exact check, a sort by folded name. For ASCII names the key is cheap:
// their case variants have the same length and the same letters, in any
// case, at the same places.
//
// For a few ASCII names, the name keys (see nameKey) serve: names that are
// case variants have the same length, and the same keys once the 0x20 bit
// of every byte is set.
func (c *canonicaliser) foldCollision(members []member, ascii bool) bool {
	if ascii && len(members) <= 8 {
		return asciiVariantsPossible(members) && c.caseVariants(members)
	}
	c.keys = appendFoldKeys(c.keys[:0], c.out, members, ascii)
	return hasDuplicate(c.keys) && c.caseVariants(members)
}

// asciiVariantsPossible reports whether two of members, whose names are
// ASCII without escapes, may be case variants.
func asciiVariantsPossible(members []member) bool {
	const folded = 0x2020202020202020
	for i := range members {
		a := &members[i] // not copies: a member is 7 words
		for j := range members[i+1:] {
			b := &members[i+1+j]
			if a.colon-a.start == b.colon-b.start && a.key[0]|folded == b.key[0]|folded && a.key[1]|folded == b.key[1]|folded {
				return true
			}
		}
	}
	return false
}

// appendFoldKeys appends to keys a key for each member's name that the
// name's case variants share.
func appendFoldKeys(keys []uint64, out []byte, members []member, ascii bool) []uint64 {
	if ascii {
		for _, m := range members {
			keys = append(keys, asciiFoldKey(nameText(out, m)))
		}
		return keys
	}
	for _, m := range members {
		keys = append(keys, foldHash(nameText(out, m)))
	}
	return keys
}

// caseVariants is the exact check: it sorts a copy of members by folded
// name, which brings case variants together.
func (c *canonicaliser) caseVariants(members []member) bool {
	out := c.out
	sorted := append(c.spare[:0], members...)
	c.spare = sorted
	slices.SortFunc(sorted, func(a, b member) int { return compareFolded(nameText(out, a), nameText(out, b)) })
	for i := 1; i < len(sorted); i++ {
		a, b := nameText(out, sorted[i-1]), nameText(out, sorted[i])
		if compareFolded(a, b) == 0 && !bytes.Equal(a, b) {
			return true
		}
	}
	return false
}

// strByte classifies the bytes of a JSON string. strStop ends the run that
// str takes as it is: '"', '\\' and control bytes. The classes that
// foldCollision tells apart are nameUpper, upper-case ASCII, and
// nameSpecial, the bytes of non-ASCII characters; all other bytes are 0.
var strByte = func() (t [256]uint8) {
	for b := range 0x20 {
		t[b] = strStop
	}
	t['"'], t['\\'] = strStop, strStop
	for b := 'A'; b <= 'Z'; b++ {
		t[b] = nameUpper
	}
	for b := utf8.RuneSelf; b < len(t); b++ {
		t[b] = nameSpecial
	}
	return t
}()

const (
	nameUpper = 1 << iota
	nameSpecial
	strStop
)

// asciiFoldKey returns a key that an ASCII name without escapes shares with
// its case variants: its length and its first, middle and last bytes with
// the 0x20 bit set, which joins the two cases of a letter (and a few other
// pairs, which only cost an exact check).
func asciiFoldKey(s []byte) uint64 {
	k := uint64(uint32(len(s)))
	if n := len(s); n > 0 {
		k |= uint64(s[0]|0x20)<<32 | uint64(s[n/2]|0x20)<<40 | uint64(s[n-1]|0x20)<<48
	}
	return k
}

// foldHash returns the FNV-1a hash of the folded characters of the
// canonical string content s. Its quality only matters for speed: a clash
// leads to the exact check, not to a wrong answer.
func foldHash(s []byte) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); {
		var r rune
		r, i = foldedRune(s, i)
		h = (h ^ uint64(r)) * 1099511628211
	}
	return h
}

// hasDuplicate reports whether two of keys are equal; it may reorder keys.
func hasDuplicate(keys []uint64) bool {
	if len(keys) <= 8 {
		for i := range keys {
			for j := i + 1; j < len(keys); j++ {
				if keys[i] == keys[j] {
					return true
				}
			}
		}
		return false
	}
	slices.Sort(keys)
	for i := 1; i < len(keys); i++ {
		if keys[i] == keys[i-1] {
			return true
		}
	}
	return false
}

// compareFolded orders the canonical string contents a and b by their
// folded characters; it returns 0 exactly when the names are equal under
// case folding.
func compareFolded(a, b []byte) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		var ra, rb rune
		ra, i = foldedRune(a, i)
		rb, j = foldedRune(b, j)
		if ra != rb {
			return cmp.Compare(ra, rb)
		}
	}
	return cmp.Compare(len(a)-i, len(b)-j)
}

// foldedRune decodes the character that starts at s[i] in the content of a
// canonical string and returns its case fold and the index after it.
//
// Names are folded decoded, as encoding/json reads them: an escape stands
// for its character (\n or \u001f is a control character, which folds to
// itself; the letters of the escape are never folded), and invalid UTF-8
// and lone surrogates, which encoding/json decodes as U+FFFD, fold as
// U+FFFD, so that "\xff" and "\ufffd", one name to encoding/json, also keep
// their order.
func foldedRune(s []byte, i int) (rune, int) {
	if ch := s[i]; ch < utf8.RuneSelf && ch != '\\' {
		if ch-'a' < 26 {
			ch -= 'a' - 'A'
		}
		return rune(ch), i + 1
	}
	return foldedRuneSlow(s, i)
}

// foldedRuneSlow is foldedRune for an escape or a non-ASCII byte.
func foldedRuneSlow(s []byte, i int) (rune, int) {
	if s[i] != '\\' {
		r, n := utf8.DecodeRune(s[i:])
		return foldRune(r), i + n
	}
	// The escapes of a canonical string: see appendByte and str.
	if s[i+1] == 'u' {
		r, _ := hex4(s, i+2)
		if utf16.IsSurrogate(r) {
			r = utf8.RuneError
		}
		return r, i + 6
	}
	return rune(unescaped[s[i+1]]), i + 2
}

// foldRune folds r as encoding/json's foldName has done to match names to
// struct fields: to the upper case of its lower case. Its classes contain
// those of bytes.EqualFold, the folding newer encoding/json versions use
// (TestFoldRune checks every cased rune), and join U+0130 and U+0131
// (dotted and dotless i) with "I" on top, so names that either folding
// finds equal keep their order.
func foldRune(r rune) rune { return unicode.ToUpper(unicode.ToLower(r)) }

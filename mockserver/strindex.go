package mockserver

import "hash/maphash"

// strSeed seeds strHash: one seed for every strIndex of the process, so
// that a string hashed once is looked up and set by that hash in several
// indexes (the inspector's two tables) and twice in one (a lookup, then
// the write).
var strSeed = maphash.MakeSeed()

// strHash is the hash a strIndex keeps s under.
func strHash(s string) uint64 { return maphash.String(strSeed, s) }

// strIndex maps strings to the int32 positions of records that hold them
// elsewhere, in bytes, without keeping a string itself: its maps have no
// pointers when no two of its strings share a hash, so the collector never
// looks into them, however many records the server keeps. A string whose
// hash another one took already goes into more, a map of strings, which
// stays empty in practice. The caller passes, to each call, the string's
// strHash h (tests give colliding ones) and holds: whether the record at a
// position holds a string. The zero value is ready to use; it is not safe
// for concurrent use.
type strIndex struct {
	first map[uint64]int32 // by hash: the position of the first string with that hash
	more  map[string]int32 // the strings whose hash another string has
}

// get returns the position of s, whose hash is h, and whether no string
// has that hash (free), which set can take from it.
func (x *strIndex) get(h uint64, s string, holds func(int32, string) bool) (i int32, ok, free bool) {
	i, taken := x.first[h]
	if taken && holds(i, s) {
		return i, true, false
	}
	i, ok = x.more[s]
	return i, ok, !taken
}

// set makes i the position of s, whose hash is h. free is what get last
// reported of h, when nothing was set since, or false; true spares the
// lookup that tells whether another string has the hash.
func (x *strIndex) set(h uint64, s string, i int32, holds func(int32, string) bool, free bool) {
	if x.first == nil {
		x.first = make(map[uint64]int32)
	}
	if free {
		x.first[h] = i
		return
	}
	if j, ok := x.first[h]; !ok || holds(j, s) {
		x.first[h] = i
		return
	}
	if x.more == nil {
		x.more = make(map[string]int32)
	}
	x.more[s] = i
}

package mockserver

import "hash/maphash"

// strIndex maps strings to the int32 positions of records that hold them
// elsewhere, in bytes, without keeping a string itself: its maps have no
// pointers when no two of its strings share a hash, so the collector never
// looks into them, however many records the server keeps. A string whose
// hash another one took already goes into more, a map of strings, which
// stays empty in practice. The caller passes, to each call, holds: whether
// the record at a position holds a string. The zero value is ready to use;
// it is not safe for concurrent use.
type strIndex struct {
	seed  maphash.Seed
	sum   func(string) uint64 // the hash; nil for maphash's, tests give one that collides
	first map[uint64]int32    // by hash: the position of the first string with that hash
	more  map[string]int32    // the strings whose hash another string has
}

func (x *strIndex) hash(s string) uint64 {
	if x.first == nil {
		x.seed, x.first = maphash.MakeSeed(), make(map[uint64]int32)
	}
	if x.sum != nil {
		return x.sum(s)
	}
	return maphash.String(x.seed, s)
}

// get returns the position of s.
func (x *strIndex) get(s string, holds func(int32, string) bool) (int32, bool) {
	if i, ok := x.first[x.hash(s)]; ok && holds(i, s) {
		return i, true
	}
	i, ok := x.more[s]
	return i, ok
}

// set makes i the position of s.
func (x *strIndex) set(s string, i int32, holds func(int32, string) bool) {
	h := x.hash(s)
	if j, ok := x.first[h]; !ok || holds(j, s) {
		x.first[h] = i
		return
	}
	if x.more == nil {
		x.more = make(map[string]int32)
	}
	x.more[s] = i
}

package memstore

import "unsafe"

// responseSize is the size of the response struct.
const responseSize = unsafe.Sizeof(response{})

// packedResponse is a response and the room for its data in one
// allocation. Room is a byte array that makes the whole a Go size class,
// so that the allocation holds no byte more than the struct and its data
// apart (a 64-byte class and the data's own), in one allocation fewer.
type packedResponse[Room any] struct {
	response
	room Room
}

// newPacked returns a response in a packedResponse, its data empty with
// Room's capacity.
func newPacked[Room any]() *response {
	p := new(packedResponse[Room])
	p.data = unsafe.Slice((*byte)(unsafe.Pointer(&p.room)), unsafe.Sizeof(p.room))[:0]
	p.packed = true
	return &p.response
}

// packedSizes are the packedResponses, smallest first: the size classes
// from 64 to 256 bytes, 16 bytes apart (TestPackedResponseSizes).
var packedSizes = [...]struct {
	room  int
	alloc func() *response
}{
	{64 - int(responseSize), newPacked[[64 - responseSize]byte]},
	{80 - int(responseSize), newPacked[[80 - responseSize]byte]},
	{96 - int(responseSize), newPacked[[96 - responseSize]byte]},
	{112 - int(responseSize), newPacked[[112 - responseSize]byte]},
	{128 - int(responseSize), newPacked[[128 - responseSize]byte]},
	{144 - int(responseSize), newPacked[[144 - responseSize]byte]},
	{160 - int(responseSize), newPacked[[160 - responseSize]byte]},
	{176 - int(responseSize), newPacked[[176 - responseSize]byte]},
	{192 - int(responseSize), newPacked[[192 - responseSize]byte]},
	{208 - int(responseSize), newPacked[[208 - responseSize]byte]},
	{224 - int(responseSize), newPacked[[224 - responseSize]byte]},
	{240 - int(responseSize), newPacked[[240 - responseSize]byte]},
	{256 - int(responseSize), newPacked[[256 - responseSize]byte]},
}

// allocResponse returns a response with nothing set but its data, empty,
// with room for n bytes, and packed: in one allocation with the struct when n fits one of the
// packedSizes, else in one of its own, its capacity its size class (the
// heap it takes, which size charges).
func allocResponse(n int) *response {
	if n <= packedSizes[len(packedSizes)-1].room {
		// The first whose room holds n: the classes are 16 bytes apart.
		return packedSizes[max(int(responseSize)+n-64+15, 0)/16].alloc()
	}
	return &response{data: append([]byte(nil), make([]byte, n)...)[:0]}
}

package contract

import (
	"testing"

	"github.com/google/uuid"
)

// TestEncodeUUID: EncodeUUID writes what uuid.UUID.String writes, for
// every byte value at every position of the UUID.
func TestEncodeUUID(t *testing.T) {
	us := []uuid.UUID{uuid.New(), {}, uuid.Must(uuid.Parse("ffffffff-ffff-4fff-bfff-ffffffffffff"))}
	for k := range 256 {
		var u uuid.UUID
		for i := range u {
			u[i] = byte(k + 17*i)
		}
		us = append(us, u)
	}
	for _, u := range us {
		var text [36]byte
		b := [16]byte(u)
		EncodeUUID(&text, &b)
		if got := string(text[:]); got != u.String() {
			t.Errorf("EncodeUUID = %s, want %s", got, u)
		}
	}
}

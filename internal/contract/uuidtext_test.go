package contract

import (
	"testing"

	"github.com/google/uuid"
)

func TestEncodeUUID(t *testing.T) {
	for _, u := range []uuid.UUID{uuid.New(), {}, uuid.Must(uuid.Parse("ffffffff-ffff-4fff-bfff-ffffffffffff"))} {
		var text [36]byte
		b := [16]byte(u)
		EncodeUUID(&text, &b)
		if got := string(text[:]); got != u.String() {
			t.Errorf("EncodeUUID = %s, want %s", got, u)
		}
	}
}

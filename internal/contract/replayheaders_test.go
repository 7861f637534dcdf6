package contract

import (
	"net/textproto"
	"testing"
)

// The server indexes its allow-list by these names as they are: they must
// be canonical.
func TestReplayHeadersCanonical(t *testing.T) {
	for _, name := range ReplayHeaders() {
		if c := textproto.CanonicalMIMEHeaderKey(name); c != name {
			t.Errorf("ReplayHeaders holds %q, want %q", name, c)
		}
	}
}

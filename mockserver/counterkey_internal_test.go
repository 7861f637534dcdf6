package mockserver

import (
	"net/textproto"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestCounterKeyHeaderNameCanonical: counterKey indexes the request's
// header map by idempotency.HeaderIdempotencyKey as it is, which finds
// what Header.Values finds only while the name is in canonical form.
func TestCounterKeyHeaderNameCanonical(t *testing.T) {
	if c := textproto.CanonicalMIMEHeaderKey(idempotency.HeaderIdempotencyKey); c != idempotency.HeaderIdempotencyKey {
		t.Fatalf("HeaderIdempotencyKey %q is not canonical (%q)", idempotency.HeaderIdempotencyKey, c)
	}
}

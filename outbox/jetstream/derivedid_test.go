package jetstream_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestCheckMessageCountsTheIDEnqueueDerives: CheckMessage is called before
// Enqueue, when a message that takes its ID from the protected request
// has none yet; Enqueue then gives it a derived ID (a 36-byte UUID), which
// the Publisher sends in the header block. A message CheckMessage accepts
// without its ID must not be refused once it has it.
func TestCheckMessageCountsTheIDEnqueueDerives(t *testing.T) {
	const derived = "0195f7a2-8c1e-8d3b-9a4f-5e6d7c8b9a0f" // the shape of idempotency.DerivedKey's
	m := outbox.Message{Topic: "created", Key: "k"}
	// The largest header value CheckMessage accepts without an ID.
	n := sort.Search(1<<17, func(n int) bool {
		m.Headers = map[string]string{"Big": strings.Repeat("v", n+1)}
		return jetstream.CheckMessage(m) != nil
	})
	m.Headers = map[string]string{"Big": strings.Repeat("v", n)}
	if err := jetstream.CheckMessage(m); err != nil {
		t.Fatalf("CheckMessage without an ID = %v", err)
	}
	m.ID = derived
	if err := jetstream.CheckMessage(m); err != nil {
		t.Errorf("CheckMessage accepts the message without its ID, refuses it with the derived one: %v", err)
	}
}

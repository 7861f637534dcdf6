package testenv

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// errCodeStreamStoreFailed is JetStream's "error creating store for
// stream" (nats.go names no constant for it).
const errCodeStreamStoreFailed jetstream.ErrorCode = 10049

// streamCreateTries bounds createStream's calls of create.
const streamCreateTries = 5

// createStream calls create and returns its result.
func createStream(_ context.Context, _ testing.TB, create func() (jetstream.Stream, error)) (jetstream.Stream, error) {
	return create()
}

package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// errCodeStreamStoreFailed is JetStream's "error creating store for
// stream" (nats.go names no constant for it).
const errCodeStreamStoreFailed jetstream.ErrorCode = 10049

// streamCreateTries bounds createStream's calls of create.
const streamCreateTries = 5

// createStream calls create until it returns no "error creating store for
// stream", streamCreateTries times at most, and returns its last result.
// nats-server 2.9 refuses a stream now and then when another is deleted
// at the same moment (its log says "mkdir .../jetstream/$G/streams: no
// such file or directory"): a race in the shared server, not the test's
// failure; the same creation a moment later succeeds.
func createStream(ctx context.Context, tb testing.TB, create func() (jetstream.Stream, error)) (jetstream.Stream, error) {
	tb.Helper()
	for try := 1; ; try++ {
		s, err := create()
		var apiErr *jetstream.APIError
		if err == nil || try == streamCreateTries || !errors.As(err, &apiErr) || apiErr.ErrorCode != errCodeStreamStoreFailed {
			return s, err
		}
		tb.Logf("testenv: create stream, try %d: %v; again", try, err)
		Pause(ctx, 20*time.Millisecond)
	}
}

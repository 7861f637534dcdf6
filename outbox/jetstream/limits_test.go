package jetstream_test

import (
	"context"
	"math"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestOverMaxPayloadIsUnpublishable: a message larger than the server's
// max_payload can never be sent as it is. The Publisher must say so
// (ErrUnpublishable), so that the relay fails it at once and publishes its
// Key's next message, rather than retry it with backoff, holding the Key,
// up to WithMaxAttempts (for ever here).
func TestOverMaxPayloadIsUnpublishable(t *testing.T) {
	srv := startNATS(t, "max_payload: 65536")
	_, js := srv.connect(t)
	s := newSetupOn(t, js, natsjs.StreamConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	big := outbox.Message{ID: "big", Topic: s.subject + "created", Key: "k", Payload: make([]byte, 70_000)}
	after := outbox.Message{ID: "after", Topic: s.subject + "created", Key: "k"}
	s.enqueue(t, true, big, after)
	relay := s.o.Relay(jetstream.NewPublisher(js), outbox.WithMaxAttempts(math.MaxInt32), outbox.WithBackoff(time.Minute, time.Minute))
	for range 3 {
		if _, err := relay.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	failed, err := s.o.Failed(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].ID != "big" || failed[0].Attempts != 1 {
		t.Errorf("Failed = %+v, want big, failed after 1 attempt", failed)
	}
	if info, err := s.stream.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Errorf("the stream holds %v messages (%v), want 1: the Key's next message, published", info.State.Msgs, err)
	}
}

package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestConsumeEndsWhenItsConsumerIsDeleted: once its consumer is deleted,
// Consume can consume nothing (a consumer made again under that name is
// another, whose configuration Consume never checked): it must return an
// error saying so, not log and wait for as long as its context lasts.
func TestConsumeEndsWhenItsConsumerIsDeleted(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cons := s.consumer(t, "deleted")
	done := make(chan error, 1)
	go func() { done <- jetstream.Consume(ctx, cons, s.in, s.effect) }()
	time.Sleep(200 * time.Millisecond) // Consume waits for messages
	if err := s.stream.DeleteConsumer(ctx, "deleted"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, jetstream.ErrConsumerDeleted) || !errors.Is(err, natsjs.ErrConsumerDeleted) {
			t.Errorf("Consume = %v, want ErrConsumerDeleted", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("Consume still runs 5 s after its consumer was deleted")
		cancel()
		<-done
	}
}

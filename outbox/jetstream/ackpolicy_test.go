package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// A consumer that is not AckExplicit would lose the effect of a message
// whose handler failed (AckNone does not redeliver it; under AckAll the
// next message's Ack acknowledges it too): Consume refuses it at once,
// before taking a message, and the messages stay for a consumer that can
// process them.
func TestConsumeRefusesAConsumerThatIsNotAckExplicit(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := jetstream.NewPublisher(s.js).Publish(ctx, []outbox.Message{{ID: "m-1", Topic: s.subject + "created", Key: "k"}}); err != nil {
		t.Fatal(err)
	}
	handler := func(ctx context.Context, tx pgx.Tx, m outbox.Message) error { return s.effect(ctx, tx, m) }
	for _, policy := range []natsjs.AckPolicy{natsjs.AckNonePolicy, natsjs.AckAllPolicy} {
		cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{Durable: "policy-" + policy.String(), AckPolicy: policy})
		if err != nil {
			t.Fatal(err)
		}
		err = jetstream.Consume(ctx, cons, s.in, handler)
		if !errors.Is(err, jetstream.ErrNotAckExplicit) {
			t.Errorf("AckPolicy %v: Consume = %v, want ErrNotAckExplicit", policy, err)
		}
	}
	ordered, err := s.stream.OrderedConsumer(ctx, natsjs.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := jetstream.Consume(ctx, ordered, s.in, handler); !errors.Is(err, jetstream.ErrNotAckExplicit) {
		t.Errorf("ordered consumer: Consume = %v, want ErrNotAckExplicit", err)
	}
	if n := s.count(t); n != 0 {
		t.Errorf("%d effects made by refused consumers", n)
	}
}

// The same failure under an AckExplicit consumer: the failed message is
// redelivered and both take effect, once each.
func TestConsumeRedeliversAFailedMessage(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs := []outbox.Message{{ID: "m-1", Topic: s.subject + "created", Key: "k"}, {ID: "m-2", Topic: s.subject + "created", Key: "k2"}}
	if err := jetstream.NewPublisher(s.js).Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	failed := false
	done := make(chan error, 1)
	go func() {
		done <- jetstream.Consume(ctx, s.consumer(t, "redeliver"), s.in, func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
			if m.ID == "m-1" && !failed { // one message at a time: no race
				failed = true
				return errors.New("smtp down")
			}
			return s.effect(ctx, tx, m)
		}, jetstream.WithNakDelay(50*time.Millisecond))
	}()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && s.count(t) < 2; {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Consume = %v", err)
	}
	if n := s.count(t); n != 2 || !failed {
		t.Errorf("%d effects of 2 messages (failed once: %v)", n, failed)
	}
}

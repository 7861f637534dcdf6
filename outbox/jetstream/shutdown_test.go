package jetstream_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// A Consume that stops (its context ends: a shutdown, a rolling restart)
// hands back the messages it fetched ahead (WithPrefetch) and did not
// handle, so that the next consumer (another instance, or this one
// restarted) gets them at once. They were left unacknowledged instead, and
// nobody could have them until the consumer's AckWait (30 s by default)
// had passed: every restart stalled up to a pull batch (500 messages) for
// that long. Each message still takes effect once.
func TestConsumeShutdownHandsBackWhatItFetched(t *testing.T) {
	const ackWait = 20 * time.Second // what the hand-back must not wait for
	s := newSetup(t)
	ctx := context.Background()
	msgs := make([]outbox.Message, 200)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: "m-" + strconv.Itoa(i), Topic: s.subject + "created", Key: "k" + strconv.Itoa(i%7)}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := jetstream.NewPublisher(s.js).Publish(pctx, msgs); err != nil {
		t.Fatal(err)
	}
	cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: "restarted", AckPolicy: natsjs.AckExplicitPolicy, AckWait: ackWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	handler := func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
		if handled.Add(1) == 10 {
			time.Sleep(20 * time.Millisecond) // the first instance is stopped meanwhile
		}
		return s.effect(ctx, tx, m)
	}
	first, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- jetstream.Consume(first, cons, s.in, handler, jetstream.WithPrefetch(100)) }()
	for handled.Load() < 10 {
		time.Sleep(time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Consume = %v", err)
	}
	before := s.count(t)

	second, cancelSecond := context.WithCancel(ctx)
	defer cancelSecond()
	go func() { _ = jetstream.Consume(second, cons, s.in, handler) }()
	start := time.Now()
	deadline := start.Add(5 * time.Second)
	n := before
	for n < len(msgs) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		n = s.count(t)
	}
	if n < len(msgs) {
		t.Fatalf("%d of %d messages took effect %v after the first Consume stopped having handled %d: the rest wait for AckWait (%v)",
			n, len(msgs), time.Since(start).Round(time.Millisecond), before, ackWait)
	}
	t.Logf("the first Consume handled %d; the second the other %d in %v", before, len(msgs)-before, time.Since(start).Round(time.Millisecond))
	if n != len(msgs) {
		t.Fatalf("%d effects for %d messages", n, len(msgs))
	}
}

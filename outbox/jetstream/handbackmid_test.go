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

// TestConsumeStopsMidHandlerQuickly: a Consume stopped while a handler
// runs and 499 messages are buffered (WithPrefetch) returns at once, and the next
// Consume gets every message, each taking effect once.
func TestConsumeStopsMidHandlerQuickly(t *testing.T) {
	s := newSetup(t)
	ctx := context.Background()
	msgs := make([]outbox.Message, 500)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: "m-" + strconv.Itoa(i), Topic: s.subject + "created"}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := jetstream.NewPublisher(s.js).Publish(pctx, msgs); err != nil {
		t.Fatal(err)
	}
	cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: "mid", AckPolicy: natsjs.AckExplicitPolicy, AckWait: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	var handled atomic.Int64
	entered := make(chan struct{})
	first, stop := context.WithCancel(ctx)
	blocking := func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
		if err := s.effect(ctx, tx, m); err != nil {
			return err
		}
		if handled.Add(1) == 5 {
			close(entered)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- jetstream.Consume(first, cons, s.in, blocking, jetstream.WithPrefetch(len(msgs)-1)) }()
	<-entered
	start := time.Now()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Consume = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Consume did not return 10 s after its context ended")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Consume took %v to stop", d)
	}
	t.Logf("stopped in %v", time.Since(start))
	second, cancelSecond := context.WithCancel(ctx)
	defer cancelSecond()
	go func() { _ = jetstream.Consume(second, cons, s.in, s.effect) }()
	deadline := time.Now().Add(5 * time.Second)
	n := 0
	for n < len(msgs) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		n = s.count(t)
	}
	time.Sleep(200 * time.Millisecond)
	if n = s.count(t); n != len(msgs) {
		t.Fatalf("%d effects for %d messages", n, len(msgs))
	}
}

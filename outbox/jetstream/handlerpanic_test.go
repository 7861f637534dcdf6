package jetstream_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestHandlerPanicLeavesItsMessageToBeRedelivered: a handler panics on
// its first run; the panic goes up through Consume to the caller, which
// recovers it and calls Consume again (as a supervisor that restarts
// what panicked does). The message the panicking handler held must be
// redelivered after AckWait and take effect: nothing of the dead Consume
// may go on telling JetStream that its handler still runs (working
// acknowledgements), which would keep the message from every consumer
// for as long as the process lives.
func TestHandlerPanicLeavesItsMessageToBeRedelivered(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := jetstream.NewPublisher(s.js).Publish(ctx, []outbox.Message{{ID: "boom", Topic: s.subject + "created"}}); err != nil {
		t.Fatal(err)
	}
	const ackWait = 600 * time.Millisecond
	cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: "panic", AckPolicy: natsjs.AckExplicitPolicy, AckWait: ackWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	handler := func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
		if runs.Add(1) == 1 {
			panic("handler bug")
		}
		return s.effect(ctx, tx, m)
	}
	supervised := func() error { return consumeRecovering(ctx, cons, s.in, handler) }
	if err := supervised(); err == nil {
		t.Fatal("Consume = nil, want the handler's panic")
	}
	done := make(chan error, 1)
	go func() { done <- supervised() }()
	deadline := time.Now().Add(8 * ackWait)
	for s.count(t) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the second Consume = %v", err)
	}
	if n := s.count(t); n != 1 {
		t.Errorf("%d effects %v after the panic (AckWait %v): %d deliveries, %d handler runs; want the message redelivered and handled",
			n, 8*ackWait, ackWait, info.Delivered.Consumer, runs.Load())
	}
}

// TestHandlerPanicEndsItsPullRequests: a handler panics while Consume
// holds a message fetched ahead and a pull request open for more
// (WithPrefetch); the caller recovers the panic and calls Consume again.
// The dead Consume's iterator must end with it: the message it fetched
// ahead, and one published after the panic, must reach the new Consume at
// once, not sit in the dead one's subscription, which nobody reads, until
// AckWait (each time a delivery spent against MaxDeliver).
func TestHandlerPanicEndsItsPullRequests(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pub := jetstream.NewPublisher(s.js)
	if err := pub.Publish(ctx, []outbox.Message{{ID: "boom", Topic: s.subject + "created"}, {ID: "ahead", Topic: s.subject + "created"}}); err != nil {
		t.Fatal(err)
	}
	const ackWait = 20 * time.Second // never waited for
	cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: "panicpull", AckPolicy: natsjs.AckExplicitPolicy, AckWait: ackWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	handler := func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
		if m.ID == "boom" {
			panic("handler bug")
		}
		return s.effect(ctx, tx, m)
	}
	supervised := func() error { return consumeRecovering(ctx, cons, s.in, handler, jetstream.WithPrefetch(4)) }
	if err := supervised(); err == nil {
		t.Fatal("Consume = nil, want the handler's panic")
	}
	if err := pub.Publish(ctx, []outbox.Message{{ID: "after", Topic: s.subject + "created"}}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- supervised() }()
	const within = 5 * time.Second
	deadline := time.Now().Add(within)
	for s.count(t) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if n := s.count(t); n != 2 {
		t.Errorf("the messages fetched ahead and published after the panic took effect %d times within %v (AckWait %v; %d deliveries, %d waiting pull requests); "+
			"want one each, by the Consume called again", n, within, ackWait, info.Delivered.Consumer, info.NumWaiting)
	}
}

// consumeRecovering runs Consume as a supervisor would: a handler's panic
// is recovered and comes back as an error.
func consumeRecovering(ctx context.Context, cons natsjs.Consumer, in *outbox.Inbox, handler jetstream.Handler, opts ...jetstream.ConsumeOption) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return jetstream.Consume(ctx, cons, in, handler, opts...)
}

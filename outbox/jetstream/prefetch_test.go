package jetstream_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestFetchedAheadMessagesKeepTheirDeliveries: 100 messages are queued
// for a consumer with AckWait 1 s and MaxDeliver 2, and a Consume whose
// handler takes 20 ms (slower than AckWait over nats.go's default pull of
// 500 messages) dies (its connection closes) 1.3 s in. The messages
// fetched ahead and waiting behind the handler must not have been
// redelivered meanwhile: each such redelivery spends one of MaxDeliver,
// and a message whose last delivery dies in the buffer is never delivered
// again, lost without its handler having run. Every message takes effect,
// through the next Consume. (The process's death: none of its handlers
// takes effect any more, and its connection closes.)
func TestFetchedAheadMessagesKeepTheirDeliveries(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 100
	s.publishN(t, ctx, n)
	const name = "prefetch"
	if _, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: name, AckPolicy: natsjs.AckExplicitPolicy, AckWait: time.Second, MaxDeliver: 2,
	}); err != nil {
		t.Fatal(err)
	}

	// The first Consume, on a connection of its own: its process dies.
	nc, err := nats.Connect(testenv.NATSURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, s.stream.CachedInfo().Config.Name, name)
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	var dead atomic.Bool // no handler of the dead process takes effect
	errDead := errors.New("the process died")
	done := make(chan error, 1)
	go func() {
		done <- jetstream.Consume(ctx, cons, s.in, func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
			if dead.Load() {
				return errDead
			}
			runs.Add(1)
			testenv.Pause(ctx, 20*time.Millisecond)
			if dead.Load() {
				return errDead
			}
			return s.effect(ctx, tx, m)
		})
	}()
	time.Sleep(1300 * time.Millisecond)
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dead.Store(true)
	nc.Close()
	if err := <-done; !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("Consume = %v, want ErrConnectionClosed", err)
	}
	first := s.count(t)

	second, err := s.stream.Consumer(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = jetstream.Consume(ctx, second, s.in, s.effect) }()
	deadline := time.Now().Add(6 * time.Second) // past the last AckWait of any delivery
	c := first
	for c < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		c = s.count(t)
	}
	if c != n {
		t.Errorf("%d of %d messages took effect (%d lost): the first Consume ran %d handlers, took %d deliveries of %d messages (%d redelivered) and died",
			c, n, n-c, runs.Load(), info.Delivered.Consumer, info.Delivered.Stream, info.Delivered.Consumer-info.Delivered.Stream)
	}
}

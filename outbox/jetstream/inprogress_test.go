package jetstream_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestSlowHandlerKeepsItsDelivery: a handler that runs longer than the
// consumer's AckWait (1 s against 300 ms) keeps its message: JetStream
// delivers it once and has it acknowledged, rather than redeliver it every
// AckWait while the first run goes on (each a concurrent delivery held on
// the inbox's row, and each counted towards MaxDeliver).
func TestSlowHandlerKeepsItsDelivery(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := jetstream.NewPublisher(s.js).Publish(ctx, []outbox.Message{{ID: "slow", Topic: s.subject + "created"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: "inprogress", AckPolicy: natsjs.AckExplicitPolicy, AckWait: 300 * time.Millisecond, MaxDeliver: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	var runs, dups atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- jetstream.Consume(ctx, cons, s.in, func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
			runs.Add(1)
			testenv.Pause(ctx, time.Second)
			return s.effect(ctx, tx, m)
		}, jetstream.WithBeforeAck(func(_ outbox.Message, dup bool) {
			if dup {
				dups.Add(1)
			}
		}))
	}()
	testenv.Eventually(t, "the message acknowledged", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.AckFloor.Stream == 1 && info.NumAckPending == 0
	})
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Consume = %v", err)
	}
	if info.Delivered.Consumer != 1 || info.NumRedelivered != 0 || runs.Load() != 1 || dups.Load() != 0 || s.count(t) != 1 {
		t.Errorf("%d deliveries (%d redelivered), %d handler runs, %d duplicates, %d effects; want 1, 0, 1, 0, 1",
			info.Delivered.Consumer, info.NumRedelivered, runs.Load(), dups.Load(), s.count(t))
	}
}

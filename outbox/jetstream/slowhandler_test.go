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

// TestHandlerSlowerThanAckWaitTakesEffectOnce: two Consume calls share a
// consumer whose AckWait (300 ms) is shorter than the handler (800 ms),
// with MaxAckPending 2: a message in a handler keeps its delivery
// (working acknowledgements), but one fetched ahead (WithPrefetch) and
// waiting behind it may be redelivered to the other Consume, and the inbox makes the later
// of the two deliveries a duplicate: each message takes effect once and
// every one is acknowledged.
func TestHandlerSlowerThanAckWaitTakesEffectOnce(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 4
	s.publishN(t, ctx, n)
	cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: "slow", AckPolicy: natsjs.AckExplicitPolicy, AckWait: 300 * time.Millisecond, MaxAckPending: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	var runs, dups atomic.Int64
	done := make(chan error, 2)
	for range 2 {
		go func() {
			done <- jetstream.Consume(ctx, cons, s.in, func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
				runs.Add(1)
				testenv.Pause(ctx, 800*time.Millisecond)
				return s.effect(ctx, tx, m)
			}, jetstream.WithPrefetch(1), jetstream.WithBeforeAck(func(_ outbox.Message, dup bool) {
				if dup {
					dups.Add(1)
				}
			}))
		}()
	}
	testenv.Eventually(t, "every message acknowledged", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.AckFloor.Stream == n && info.NumAckPending == 0
	})
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("Consume = %v", err)
		}
	}
	if c := s.count(t); c != n || runs.Load() != n {
		t.Errorf("%d effects, %d handler runs (%d duplicates); want %d, %d", c, runs.Load(), dups.Load(), n, n)
	}
}

package jetstream_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestConsumeWithinTheConsumersRequestLimits: a consumer may bound the
// pull requests it takes (MaxRequestBatch, MaxRequestExpires); JetStream
// refuses a larger one. Consume must pull within them and process the
// messages, not wait for ever, saying nothing, on refused pulls.
func TestConsumeWithinTheConsumersRequestLimits(t *testing.T) {
	for _, cfg := range []natsjs.ConsumerConfig{
		{Durable: "batch", MaxRequestBatch: 10},
		{Durable: "expires", MaxRequestExpires: 5 * time.Second},
		{Durable: "one", MaxRequestBatch: 1, MaxRequestExpires: time.Second},
	} {
		t.Run(cfg.Durable, func(t *testing.T) {
			s := newSetup(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const n = 3
			s.publishN(t, ctx, n)
			cfg.AckPolicy = natsjs.AckExplicitPolicy
			cons, err := s.stream.CreateOrUpdateConsumer(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				done <- jetstream.Consume(ctx, cons, s.in, func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
					return s.effect(ctx, tx, m)
				})
			}()
			deadline := time.Now().Add(5 * time.Second)
			for s.count(t) < n && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Consume = %v", err)
			}
			if c := s.count(t); c != n {
				t.Errorf("%d of %d messages took effect in 5 s", c, n)
			}
		})
	}
}

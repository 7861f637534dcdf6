package jetstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestPrefetchBounds: while its handler holds the first of 20 messages,
// a Consume with WithPrefetch(n) holds n more fetched ahead (n+1
// delivered and not acknowledged): none for n <= 0, and no more than the
// consumer's MaxRequestBatch lets one pull request take (n+1 capped at
// it), as JetStream refuses a larger request and Consume would then
// receive nothing at all. Every message takes effect once the handler
// goes on.
func TestPrefetchBounds(t *testing.T) {
	for _, c := range []struct {
		prefetch, maxBatch, held int
	}{
		{prefetch: -3, held: 1},
		{prefetch: 0, held: 1},
		{prefetch: 2, held: 3},
		{prefetch: 3, maxBatch: 3, held: 3},
		{prefetch: 10, maxBatch: 3, held: 3},
		{prefetch: 5, maxBatch: 1, held: 1},
	} {
		t.Run(fmt.Sprintf("prefetch=%d,MaxRequestBatch=%d", c.prefetch, c.maxBatch), func(t *testing.T) {
			s := newSetup(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const n = 20
			s.publishN(t, ctx, n)
			cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
				Durable: "cap", AckPolicy: natsjs.AckExplicitPolicy, AckWait: 10 * time.Second, MaxRequestBatch: c.maxBatch,
			})
			if err != nil {
				t.Fatal(err)
			}
			entered, release := make(chan struct{}), make(chan struct{})
			done := make(chan error, 1)
			go func() {
				first := true
				done <- jetstream.Consume(ctx, cons, s.in, func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
					if first {
						first = false
						close(entered)
						<-release
					}
					return s.effect(ctx, tx, m)
				}, jetstream.WithPrefetch(c.prefetch))
			}()
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				t.Fatal("no message handled in 5 s")
			}
			// The messages fetched ahead arrive while the handler holds
			// the first: give them time to, then count them.
			time.Sleep(300 * time.Millisecond)
			info, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			close(release)
			testenv.Eventually(t, "every message takes effect", func() bool { return s.count(t) >= n })
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Consume = %v", err)
			}
			if info.NumAckPending != c.held || info.Delivered.Stream != uint64(c.held) {
				t.Errorf("while the handler held the first message, %d delivered (%d not acknowledged), want %d", info.Delivered.Stream, info.NumAckPending, c.held)
			}
			if got := s.count(t); got != n {
				t.Errorf("%d effects, want %d", got, n)
			}
		})
	}
}

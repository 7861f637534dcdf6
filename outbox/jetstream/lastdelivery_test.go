package jetstream_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestStopKeepsMessagesOnTheirLastDelivery: a consumer with MaxDeliver 2,
// whose handler (in the first Consume) fails each message's first try,
// its first delivery spent, so that every message handled is on its last
// delivery. A Consume stopped mid-handler hands back the message in hand
// and those it fetched ahead; a message handed back on its last delivery
// is never delivered again, lost though its handler never failed on it.
// Every message takes effect, through the stopped Consume or the next one
// (whose handler does not fail).
func TestStopKeepsMessagesOnTheirLastDelivery(t *testing.T) {
	for _, prefetch := range []int{0, 10} {
		t.Run("prefetch="+strconv.Itoa(prefetch), func(t *testing.T) {
			s := newSetup(t)
			ctx := context.Background()
			const n = 30
			s.publishN(t, ctx, n)
			cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
				Durable: "last", AckPolicy: natsjs.AckExplicitPolicy, AckWait: 20 * time.Second, MaxDeliver: 2,
			})
			if err != nil {
				t.Fatal(err)
			}
			var (
				mu    sync.Mutex
				tried = map[string]bool{}
			)
			firstTry := func(id string) bool {
				mu.Lock()
				defer mu.Unlock()
				first := !tried[id]
				tried[id] = true
				return first
			}
			var handled atomic.Int64
			entered := make(chan struct{})
			first, stop := context.WithCancel(ctx)
			handler := func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
				if firstTry(m.ID) {
					return errors.New("transient")
				}
				if handled.Add(1) == 5 {
					close(entered)
					<-ctx.Done() // stopped mid-handler
					return ctx.Err()
				}
				return s.effect(ctx, tx, m)
			}
			done := make(chan error, 1)
			go func() { done <- jetstream.Consume(first, cons, s.in, handler, jetstream.WithPrefetch(prefetch)) }()
			<-entered
			stop()
			if err := <-done; err != nil {
				t.Fatalf("Consume = %v", err)
			}
			stopped := s.count(t)

			second, cancelSecond := context.WithCancel(ctx)
			defer cancelSecond()
			go func() { _ = jetstream.Consume(second, cons, s.in, s.effect) }()
			deadline := time.Now().Add(5 * time.Second)
			c := stopped
			for c < n && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				c = s.count(t)
			}
			if c != n {
				t.Errorf("%d of %d messages took effect (%d lost); %d when the first Consume stopped", c, n, n-c, stopped)
			}
		})
	}
}

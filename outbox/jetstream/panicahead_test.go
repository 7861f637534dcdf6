package jetstream_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestPanicHandlesMessagesAheadOnTheirLastDelivery: a consumer with
// MaxDeliver 1, so that every message is on its last delivery, and a
// Consume holding messages fetched ahead (WithPrefetch) when its handler
// panics while consuming. The panic goes up through Consume, but only
// after the messages fetched ahead were handled, as when Consume stops:
// JetStream would not redeliver them. They were logged as lost and
// dropped. With a second panic, on one of those, as the first goes up,
// the others are still handled, and each of the two lost messages is
// logged at level Error with its ID.
func TestPanicHandlesMessagesAheadOnTheirLastDelivery(t *testing.T) {
	for _, panics := range []int{1, 2} {
		t.Run("panics="+strconv.Itoa(panics), func(t *testing.T) {
			s := newSetup(t)
			ctx := context.Background()
			const n, prefetch = 30, 10
			s.publishN(t, ctx, n)
			cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
				Durable: "aheadpanic", AckPolicy: natsjs.AckExplicitPolicy, AckWait: 20 * time.Second, MaxDeliver: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			var (
				handled atomic.Int64
				mu      sync.Mutex
				lost    []string // the IDs whose handler panicked
			)
			handler := func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
				if handled.Add(1) == 5 {
					// The messages fetched ahead are there as the
					// handler panics (Consume runs on the test's
					// goroutine).
					testenv.Eventually(t, "messages fetched ahead", func() bool {
						info, err := cons.Info(ctx)
						return err == nil && info.NumAckPending >= 3
					})
				}
				mu.Lock()
				boom := len(lost) > 0 && len(lost) < panics || handled.Load() == 5
				if boom {
					lost = append(lost, m.ID)
				}
				mu.Unlock()
				if boom {
					panic("handler bug " + m.ID)
				}
				return s.effect(ctx, tx, m)
			}
			var logs logRecords
			if err := consumeRecovering(ctx, cons, s.in, handler, jetstream.WithPrefetch(prefetch), jetstream.WithConsumeLogger(logs.logger())); err == nil {
				t.Fatal("Consume = nil, want the handler's panic")
			}
			mu.Lock()
			gone := append([]string(nil), lost...)
			mu.Unlock()
			if len(gone) != panics {
				t.Fatalf("the handler panicked on %q, want %d messages", gone, panics)
			}

			second, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() { _ = jetstream.Consume(second, cons, s.in, s.effect) }()
			deadline := time.Now().Add(5 * time.Second)
			c := s.count(t)
			for c < n-panics && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
				c = s.count(t)
			}
			if c != n-panics {
				t.Errorf("%d of %d messages took effect, want all but %q, whose handler panicked", c, n, gone)
			}
			for _, id := range gone {
				var logged bool
				for _, r := range logs.all() {
					logged = logged || r.level == slog.LevelError && r.str("id") == id
				}
				if !logged {
					t.Errorf("no Error names %s, lost on its last delivery as its handler panicked; logged: %+v", id, logs.all())
				}
			}
		})
	}
}

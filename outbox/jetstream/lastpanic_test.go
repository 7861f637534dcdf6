package jetstream_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestPanicWhileStoppingHandlesTheRestOnTheirLastDelivery: a consumer
// with MaxDeliver 1, so that every message is on its last delivery, and a
// Consume holding messages fetched ahead (WithPrefetch) when it stops.
// Stopping, Consume handles those itself, JetStream would not redeliver
// them; its handler panics on the first. The panic goes up through
// Consume, but only after the others were handled: they took effect, and
// the one whose handler panicked, lost, is logged at level Error with its
// ID. They were all dropped, and not a line said so.
func TestPanicWhileStoppingHandlesTheRestOnTheirLastDelivery(t *testing.T) {
	s := newSetup(t)
	ctx := context.Background()
	const n, prefetch = 30, 10
	s.publishN(t, ctx, n)
	cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: "lastpanic", AckPolicy: natsjs.AckExplicitPolicy, AckWait: 20 * time.Second, MaxDeliver: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	first, stop := context.WithCancel(ctx)
	defer stop()
	var (
		handled  atomic.Int64
		panicked atomic.Value // the ID whose handler panicked
	)
	entered := make(chan struct{})
	handler := func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
		if first.Err() != nil && panicked.CompareAndSwap(nil, m.ID) {
			panic("handler bug")
		}
		if handled.Add(1) == 5 {
			close(entered)
			<-ctx.Done() // stopped mid-handler
			return ctx.Err()
		}
		return s.effect(ctx, tx, m)
	}
	var logs logRecords
	done := make(chan error, 1)
	go func() {
		done <- consumeRecovering(first, cons, s.in, handler, jetstream.WithPrefetch(prefetch), jetstream.WithConsumeLogger(logs.logger()))
	}()
	<-entered
	// The messages fetched ahead are there to be handled as it stops.
	var pending int
	testenv.Eventually(t, "messages fetched ahead", func() bool {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pending = info.NumAckPending
		return pending >= 3
	})
	stop()
	if err := <-done; err == nil {
		t.Fatal("Consume = nil, want the handler's panic")
	}
	lost, _ := panicked.Load().(string)
	if lost == "" {
		t.Fatal("the handler never ran as Consume stopped")
	}

	second, cancelSecond := context.WithCancel(ctx)
	defer cancelSecond()
	go func() { _ = jetstream.Consume(second, cons, s.in, s.effect) }()
	deadline := time.Now().Add(5 * time.Second)
	c := s.count(t)
	for c < n-1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		c = s.count(t)
	}
	if c != n-1 {
		t.Errorf("%d of %d messages took effect, want all but %s, whose handler panicked (%d held by the stopped Consume)", c, n, lost, pending)
	}
	var logged bool
	for _, r := range logs.all() {
		logged = logged || r.level == slog.LevelError && r.str("id") == lost
	}
	if !logged {
		t.Errorf("no Error names %s, lost on its last delivery as its handler panicked; logged: %+v", lost, logs.all())
	}
}

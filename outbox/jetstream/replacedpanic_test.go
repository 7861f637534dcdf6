package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestReplacedPanicIsLogged: a handler panics on m-1, on its first
// delivery, while Consume holds m-0 fetched ahead on its last delivery
// (MaxDeliver 2: its first handling failed); Consume handles m-0 before
// the panic goes up, and the handler panics on it too. The second panic
// replaces the first going up (Go's rule for a panic in a deferred call):
// the caller that recovers gets m-0's alone. m-1's panic must not vanish
// without a trace: a log record names m-1, as the Handler's doc says of
// the messages of both panics. Nothing did: m-1 was not on its last
// delivery, and only the panics that lose their message were logged.
func TestReplacedPanicIsLogged(t *testing.T) {
	s := newSetup(t)
	ctx := context.Background()
	s.publishN(t, ctx, 2)
	cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: "replacedpanic", AckPolicy: natsjs.AckExplicitPolicy, AckWait: 20 * time.Second, MaxDeliver: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	var failed atomic.Bool
	handler := func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
		switch {
		case m.ID == "m-0" && failed.CompareAndSwap(false, true):
			return errors.New("first try fails") // redelivered after the nak delay: its last delivery
		case m.ID == "m-1":
			// m-0's last delivery is fetched ahead as this handler
			// panics.
			testenv.Eventually(t, "m-0 redelivered ahead", func() bool {
				info, err := cons.Info(ctx)
				return err == nil && info.Delivered.Consumer >= 3
			})
		}
		panic("handler bug on " + m.ID)
	}
	var logs logRecords
	err = consumeRecovering(ctx, cons, s.in, handler, jetstream.WithPrefetch(4),
		jetstream.WithNakDelay(200*time.Millisecond), jetstream.WithConsumeLogger(logs.logger()))
	if err == nil || !strings.Contains(err.Error(), "handler bug on m-0") {
		t.Fatalf("Consume = %v, want the panic on m-0, which replaced m-1's", err)
	}
	for _, r := range logs.all() {
		if r.str("id") == "m-1" {
			return
		}
	}
	t.Errorf("no record names m-1, whose handler's panic m-0's replaced; logged: %+v", logs.all())
}

package jetstream_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestRepublishedAfterTheDuplicatesWindowTakesEffectOnce: a relay that
// died after publishing, its batch published again by the next relay once
// the stream's Duplicates window (1 s here) is over, puts each message in
// the stream twice; the consumer's inbox drops the second copy, so each
// message takes effect once.
func TestRepublishedAfterTheDuplicatesWindowTakesEffectOnce(t *testing.T) {
	_, js := startNATS(t, "").connect(t)
	s := newSetupOn(t, js, natsjs.StreamConfig{Duplicates: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 10
	var msgs []outbox.Message
	for i := range n {
		msgs = append(msgs, outbox.Message{ID: "m-" + strconv.Itoa(i), Topic: s.subject + "created", Key: "k" + strconv.Itoa(i%3)})
	}
	s.enqueue(t, true, msgs...)
	pub := jetstream.NewPublisher(s.js)
	// The dead relay's publication: the stream took the batch, the marks
	// never committed.
	if err := pub.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	testenv.Pause(ctx, 1500*time.Millisecond) // past the Duplicates window
	relay := s.o.Relay(pub)
	for {
		k, err := relay.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			break
		}
	}
	if info, err := s.stream.Info(ctx); err != nil || info.State.Msgs != 2*n {
		t.Fatalf("the stream holds %v messages (%v), want %d: each twice, the window over", info.State.Msgs, err, 2*n)
	}
	var dups int
	done := make(chan error, 1)
	go func() {
		done <- jetstream.Consume(ctx, s.consumer(t, "mailer"), s.in, func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
			return s.effect(ctx, tx, m)
		}, jetstream.WithBeforeAck(func(_ outbox.Message, dup bool) {
			if dup {
				dups++ // Consume's goroutine only
			}
		}))
	}()
	cons := s.consumer(t, "mailer")
	testenv.Eventually(t, "every copy acknowledged", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.AckFloor.Stream == 2*n
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Consume = %v", err)
	}
	var distinct, total int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(DISTINCT message_id), count(*) FROM `+s.effects).Scan(&distinct, &total); err != nil {
		t.Fatal(err)
	}
	if distinct != n || total != n || dups != n {
		t.Errorf("%d effects of %d messages, %d duplicates dropped; want %d of %d, %d dropped", total, distinct, dups, n, n, n)
	}
}

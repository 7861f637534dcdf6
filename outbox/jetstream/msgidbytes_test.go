package jetstream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestConsumeMessageIDAnyBytes: a Nats-Msg-Id is bytes its publisher
// chooses, a NUL byte or invalid UTF-8 among them, which JetStream carries
// as they are and a PostgreSQL text column refuses. Such a message must
// take effect once and be acknowledged, and its redelivery (here: a
// consumer that committed it and died before its ack) be a duplicate.
// Before the inbox encoded its columns, its insert failed on every
// delivery: the message was nacked and redelivered without end, its effect
// never made.
func TestConsumeMessageIDAnyBytes(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	effects := `"` + testenv.PostgresTable(t, s.pool, "outboxjs_test_bytes_") + `"`
	if _, err := s.pool.Exec(ctx, `CREATE TABLE `+effects+` (message_id bytea NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	effect := func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+effects+` VALUES ($1)`, []byte(m.ID))
		return err
	}
	ids := []string{"nul\x00id", "bad\xffutf8", "\x01mark", "plain"}
	for _, id := range ids {
		m := nats.NewMsg(s.subject + "t")
		m.Header.Set(natsjs.MsgIDHeader, id)
		if _, err := s.js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("publish %q: %v", id, err)
		}
	}
	// A second publication of each is dropped by the stream's deduplication
	// if the ID arrives as it was sent.
	for _, id := range ids {
		m := nats.NewMsg(s.subject + "t")
		m.Header.Set(natsjs.MsgIDHeader, id)
		if _, err := s.js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("publish %q again: %v", id, err)
		}
	}
	if info, err := s.stream.Info(ctx); err != nil || info.State.Msgs != uint64(len(ids)) {
		t.Fatalf("stream holds %v messages (%v), want %d", info.State.Msgs, err, len(ids))
	}
	// A consumer that committed the first message and died before its ack.
	if _, err := s.in.Process(ctx, "bytes", ids[0], func(ctx context.Context, tx pgx.Tx) error {
		return effect(ctx, tx, outbox.Message{ID: ids[0]})
	}); err != nil {
		t.Errorf("Process(%q): %v", ids[0], err)
	}

	var mu sync.Mutex
	acked := map[string]bool{} // ID: duplicate
	cons := s.consumer(t, "bytes")
	done := make(chan error, 1)
	go func() {
		done <- jetstream.Consume(ctx, cons, s.in, effect, jetstream.WithNakDelay(50*time.Millisecond),
			jetstream.WithBeforeAck(func(m outbox.Message, dup bool) {
				mu.Lock()
				defer mu.Unlock()
				acked[m.ID] = dup
			}))
	}()
	var info *natsjs.ConsumerInfo
	for deadline := time.Now().Add(testenv.Patience); ; {
		var err error
		info, err = cons.Info(ctx)
		if err == nil && info.NumPending == 0 && info.NumAckPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("after %v: %d messages not acknowledged, %d deliveries of %d messages (%v); want all acknowledged",
				testenv.Patience, info.NumAckPending, info.Delivered.Consumer, len(ids), err)
			break
		}
		testenv.Pause(ctx, 10*time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Consume = %v, want nil after cancel", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, id := range ids {
		dup, ok := acked[id]
		if !ok || dup != (i == 0) {
			t.Errorf("message %q: acknowledged %v, as a duplicate %v; want acknowledged, as a duplicate %v", id, ok, dup, i == 0)
		}
		var n int
		if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+effects+` WHERE message_id = $1`, []byte(id)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("message %q took effect %d times, want once", id, n)
		}
	}
}

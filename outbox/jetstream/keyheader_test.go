package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestKeyArrivesUnchangedOrIsRefused: the Publisher carries a message's
// Key in the Outbox-Key header so that the consumer gets it back; NATS
// trims header values and turns line breaks into spaces, so a Key with a
// space at either end or a control character would arrive as another Key
// ("k " as "k", one Key with "k"). Enqueue must refuse such a Key, as it
// refuses such an ID, or it must arrive as it was enqueued.
func TestKeyArrivesUnchangedOrIsRefused(t *testing.T) {
	s := newSetup(t)
	ctx := context.Background()
	keys := []string{"k ", " k", "line\nbreak", "tab\tk", "cr\rk"}
	var sent []string
	for i, k := range keys {
		m := outbox.Message{ID: "m" + string(rune('0'+i)), Topic: s.subject + "t", Key: k}
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return s.o.Enqueue(ctx, tx, m) })
		switch {
		case errors.Is(err, outbox.ErrInvalidMessage):
		case err != nil:
			t.Fatalf("Enqueue(key %q) = %v", k, err)
		default:
			sent = append(sent, k)
		}
	}
	if len(sent) == 0 {
		return
	}
	if _, err := s.o.Relay(jetstream.NewPublisher(s.js)).RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := s.consumer(t, "keys").Fetch(len(sent), natsjs.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for m := range b.Messages() {
		if got := m.Headers().Get(jetstream.KeyHeader); got != sent[i] {
			t.Errorf("Key %q arrived as %q", sent[i], got)
		}
		i++
	}
	if i != len(sent) {
		t.Errorf("%d of %d messages arrived", i, len(sent))
	}
}

package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/outbox"
)

// TestEnqueueRefusesTextItCannotCarry: a message's ID, Topic, Key and
// Headers go to PostgreSQL text and jsonb columns, then to a broker. Text
// that is not valid UTF-8, or holds NUL, either failed Enqueue with a bare
// PostgreSQL error (SQLSTATE 22021 or 22P05) that errors.Is could not tell
// from an outage, or, in a header, was changed on the way (json.Marshal
// writes invalid UTF-8 as U+FFFD), so the consumer received other bytes
// than were enqueued. Each is refused as ErrInvalidMessage, naming the
// field, and nothing is enqueued.
func TestEnqueueRefusesTextItCannotCarry(t *testing.T) {
	o, pool := newOutbox(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		m    outbox.Message
	}{
		{"ID with invalid UTF-8", outbox.Message{ID: "m-\xff", Topic: "t"}},
		{"Topic with invalid UTF-8", outbox.Message{ID: "m-1", Topic: "t\xfe"}},
		{"Topic with NUL", outbox.Message{ID: "m-2", Topic: "t\x00u"}},
		{"Key with invalid UTF-8", outbox.Message{ID: "m-3", Topic: "t", Key: "k\xff"}},
		{"header value with invalid UTF-8", outbox.Message{ID: "m-4", Topic: "t", Headers: map[string]string{"h": "v\xff"}}},
		{"header name with invalid UTF-8", outbox.Message{ID: "m-5", Topic: "t", Headers: map[string]string{"h\xff": "v"}}},
		{"header value with NUL", outbox.Message{ID: "m-6", Topic: "t", Headers: map[string]string{"h": "v\x00w"}}},
		{"header name with NUL", outbox.Message{ID: "m-7", Topic: "t", Headers: map[string]string{"h\x00": "v"}}},
	} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return o.Enqueue(ctx, tx, tc.m) })
		if !errors.Is(err, outbox.ErrInvalidMessage) {
			t.Errorf("%s: Enqueue = %v, want ErrInvalidMessage", tc.name, err)
		}
	}
	// Text that is valid goes through as it is, a header value with a
	// space at either end or a non-ASCII letter included; it is the only
	// message the relay publishes.
	m := outbox.Message{ID: "m-ok", Topic: "paiement.créé", Key: "clé", Headers: map[string]string{"note": " été "}}
	enqueue(t, pool, o, m)
	rec := &recorder{}
	drain(t, o.Relay(rec))
	got := rec.messages()
	if len(got) != 1 || got[0].Topic != m.Topic || got[0].Key != m.Key || got[0].Headers["note"] != " été " {
		t.Errorf("published %+v, want only %+v", got, m)
	}
}

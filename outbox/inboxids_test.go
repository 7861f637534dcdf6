package outbox_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// TestInboxIDsAnyBytes: a message ID (a JetStream Nats-Msg-Id is bytes its
// publisher chooses) or a consumer name may hold a NUL byte or invalid
// UTF-8, which a PostgreSQL text column refuses. Such a message must be
// processed once, its redelivery a duplicate, like any other; before the
// inbox encoded them, the INSERT failed on every delivery, so the consumer
// nacked the message and the broker redelivered it without end, its effect
// never made. IDs that differ only in the escape form must stay distinct
// messages.
func TestInboxIDsAnyBytes(t *testing.T) {
	in, _, _ := newInbox(t)
	ctx := context.Background()
	type pair struct{ consumer, id string }
	pairs := []pair{
		{"mailer", "nul\x00id"},
		{"mailer", "bad \xff utf8"},
		{"mailer", "\x01starts with the mark"},
		{"mailer", "\x01" + "6e756c00" + "6964"}, // the escaped form of "nul\x00id", as an ID of its own
		{"mailer", "plain"},
		{"mail\x00er", "plain"},
		{"mail\xfeer", "bad \xff utf8"},
	}
	for _, p := range pairs {
		runs := 0
		fn := func(context.Context, pgx.Tx) error { runs++; return nil }
		if dup, err := in.Process(ctx, p.consumer, p.id, fn); dup || err != nil {
			t.Errorf("Process(%q, %q) = %v, %v; want a first run", p.consumer, p.id, dup, err)
		}
		if dup, err := in.Process(ctx, p.consumer, p.id, fn); !dup || err != nil {
			t.Errorf("redelivery: Process(%q, %q) = %v, %v; want a duplicate", p.consumer, p.id, dup, err)
		}
		if runs != 1 {
			t.Errorf("Process(%q, %q): fn ran %d times, want once", p.consumer, p.id, runs)
		}
	}
}

// TestInboxRowsOfEarlierVersionsKeepMatching: a row written before the
// inbox encoded its columns (an ID of valid UTF-8 without NUL, kept as it
// is) is still recognised: its redelivery is a duplicate.
func TestInboxRowsOfEarlierVersionsKeepMatching(t *testing.T) {
	ctx := context.Background()
	pool := testenv.PostgresPool(t)
	table := testenv.PostgresTable(t, pool, "inbox_test_")
	in := outbox.NewInbox(pool, outbox.WithTable(table))
	if err := in.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO "`+table+`" (consumer, message_id) VALUES ('mailer', 'm-1 ✓')`); err != nil {
		t.Fatal(err)
	}
	ran := false
	dup, err := in.Process(ctx, "mailer", "m-1 ✓", func(context.Context, pgx.Tx) error { ran = true; return nil })
	if !dup || err != nil || ran {
		t.Errorf("Process of a message an earlier version recorded = %v, %v (fn ran: %v); want a duplicate", dup, err, ran)
	}
}

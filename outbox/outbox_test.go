package outbox_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// TestRolledBackPublishesNothing: a rolled-back transaction's message is
// never handed to the Publisher; a committed one is, once, with its fields.
func TestRolledBackPublishesNothing(t *testing.T) {
	o, pool := newOutbox(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Enqueue(ctx, tx, msg("rolled-back", "k")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	want := outbox.Message{ID: "committed", Topic: "t.x", Key: "k", Payload: []byte("p"), Headers: map[string]string{"a": "b"}}
	enqueue(t, pool, o, want)
	rec := &recorder{}
	drain(t, o.Relay(rec))
	got := rec.messages()
	if len(got) != 1 || got[0].ID != want.ID || got[0].Topic != want.Topic || got[0].Key != want.Key ||
		string(got[0].Payload) != "p" || got[0].Headers["a"] != "b" {
		t.Fatalf("published %+v, want only %+v", got, want)
	}
	if s, err := o.Stats(ctx); err != nil || s != (outbox.Stats{Published: 1}) {
		t.Errorf("Stats = %+v, %v; want 1 published and nothing else", s, err)
	}
}

// TestEnqueueSameIDIsNoOp: an ID enqueued again, pending or published, adds
// nothing; one call holding an ID twice, a message without a topic or an
// ID that a broker header would not carry as it is, is refused.
func TestEnqueueSameIDIsNoOp(t *testing.T) {
	o, pool := newOutbox(t)
	enqueue(t, pool, o, msg("a", "k"))
	enqueue(t, pool, o, msg("a", "k"))
	rec := &recorder{}
	drain(t, o.Relay(rec))
	enqueue(t, pool, o, msg("a", "k"))
	drain(t, o.Relay(rec))
	if n := rec.count(); n != 1 {
		t.Errorf("published %d messages, want 1", n)
	}
	enqueue(t, pool, o, msg("a b", "k")) // a space inside an ID is carried as it is
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		msgs []outbox.Message
	}{
		{"same ID twice", []outbox.Message{msg("b", "k"), msg("b", "k")}},
		{"no topic", []outbox.Message{{ID: "c"}}},
		// IDs a broker header would not carry as they are (NATS trims a
		// value and turns line breaks into spaces, so "m-1 " would be
		// "m-1" to its deduplication, and one of the two dropped).
		{"ID ending in a space", []outbox.Message{msg("m-1 ", "k")}},
		{"ID starting with a space", []outbox.Message{msg(" m-1", "k")}},
		{"ID with a line break", []outbox.Message{msg("a\nb", "k")}},
		{"ID with a tab", []outbox.Message{msg("a\tb", "k")}},
		{"ID with NUL", []outbox.Message{msg("a\x00b", "k")}},
	} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return o.Enqueue(ctx, tx, tc.msgs...) })
		if !errors.Is(err, outbox.ErrInvalidMessage) {
			t.Errorf("%s: Enqueue = %v, want ErrInvalidMessage", tc.name, err)
		}
	}
}

// TestEnqueueDerivesIDFromTheRequest: without an ID, a message enqueued
// under a protected request gets the request's derived key, the same on a
// second run of the request; outside one, Enqueue refuses.
func TestEnqueueDerivesIDFromTheRequest(t *testing.T) {
	o, pool := newOutbox(t)
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return o.Enqueue(ctx, tx, outbox.Message{Topic: "t"})
	})
	if !errors.Is(err, outbox.ErrNoID) {
		t.Errorf("Enqueue without ID outside a request = %v, want ErrNoID", err)
	}

	var derived []string
	h := idempotency.Middleware(memstore.New())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want, _ := idempotency.DerivedKey(r.Context(), "outbox:payment.created:p-1")
		derived = append(derived, want)
		err := pgx.BeginFunc(r.Context(), pool, func(tx pgx.Tx) error {
			return o.Enqueue(r.Context(), tx, outbox.Message{Topic: "payment.created", Key: "p-1"})
		})
		if err != nil {
			t.Errorf("Enqueue: %v", err)
		}
		w.WriteHeader(http.StatusInternalServerError) // not stored: the retry runs again
	}))
	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "k-1")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	rec := &recorder{}
	drain(t, o.Relay(rec))
	got := rec.messages()
	if len(derived) != 2 || len(got) != 1 || got[0].ID != derived[0] {
		t.Fatalf("two runs derived %q and published %+v, want one message with the derived ID", derived, got)
	}
}

// TestEnqueueDerivedIDTwiceInOneTransaction: two Enqueue calls of one
// request's transaction, each a message with the same Topic and Key and no
// ID, derive the same ID; the second was skipped as an existing row, Enqueue
// returned nil and the message was lost at commit. It is now refused with
// ErrInvalidMessage. An explicit ID enqueued twice stays a no-op, and the
// same derived ID in a later transaction (a re-run) is skipped as before.
// Found by a review helper.
func TestEnqueueDerivedIDTwiceInOneTransaction(t *testing.T) {
	o, pool := newOutbox(t)
	var errs []error
	h := idempotency.Middleware(memstore.New())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := pgx.BeginFunc(r.Context(), pool, func(tx pgx.Tx) error {
			if err := o.Enqueue(r.Context(), tx, outbox.Message{ID: "explicit", Topic: "cart.item_added"}); err != nil {
				return err
			}
			if err := o.Enqueue(r.Context(), tx, outbox.Message{ID: "explicit", Topic: "cart.item_added"}); err != nil {
				return err // an explicit ID twice: a no-op, not an error
			}
			if err := o.Enqueue(r.Context(), tx, outbox.Message{Topic: "cart.item_added", Key: "cart-1", Payload: []byte("apple")}); err != nil {
				return err
			}
			return o.Enqueue(r.Context(), tx, outbox.Message{Topic: "cart.item_added", Key: "cart-1", Payload: []byte("pear")})
		})
		errs = append(errs, err)
		w.WriteHeader(http.StatusInternalServerError) // not stored: a retry runs again
	}))
	req := httptest.NewRequest(http.MethodPost, "/cart", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "k-1")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if len(errs) != 1 || !errors.Is(errs[0], outbox.ErrInvalidMessage) {
		t.Fatalf("the second message with the same derived ID: Enqueue = %v; want ErrInvalidMessage", errs)
	}
	rec := &recorder{}
	drain(t, o.Relay(rec))
	if n := rec.count(); n != 0 {
		t.Errorf("published %d messages of a transaction that rolled back", n)
	}
}

func TestSchema(t *testing.T) {
	if _, err := outbox.Schema("Bad-Name"); !errors.Is(err, pgstore.ErrInvalidTable) {
		t.Errorf("Schema(bad) = %v, want ErrInvalidTable", err)
	}
	if _, err := outbox.InboxSchema("a.b.c"); !errors.Is(err, pgstore.ErrInvalidTable) {
		t.Errorf("InboxSchema(bad) = %v, want ErrInvalidTable", err)
	}
	sql, err := outbox.Schema("app.events")
	if err != nil || !strings.Contains(sql, `CREATE TABLE IF NOT EXISTS "app"."events"`) {
		t.Errorf("Schema = %q, %v", sql, err)
	}
	o, _ := newOutbox(t)
	if err := o.CreateSchema(context.Background()); err != nil { // again
		t.Errorf("second CreateSchema: %v", err)
	}
	pool := testenv.PostgresPool(t)
	in := outbox.NewInbox(pool, outbox.WithTable(testenv.PostgresTable(t, pool, "inbox_test_")))
	for range 2 {
		if err := in.CreateSchema(context.Background()); err != nil {
			t.Errorf("inbox CreateSchema: %v", err)
		}
	}
}

package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// TestPublishErrorIndexOutOfRange: a Publisher whose *PublishError names
// no message of the batch (a bug of its own) fails the batch; Run must
// not panic on it.
func TestPublishErrorIndexOutOfRange(t *testing.T) {
	pool := testenv.PostgresPool(t)
	o := outbox.New(pool, outbox.WithTable(testenv.PostgresTable(t, pool, "outbox_test_")))
	if err := o.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	enqueue(t, pool, o, msg("a", "k"), msg("b", ""))
	rec := &recorder{fail: func(call int, ms []outbox.Message) error {
		if call == 1 {
			return &outbox.PublishError{Index: len(ms), Err: errors.New("confused")}
		}
		return nil
	}}
	runRelay(t, o.Relay(rec, outbox.WithPollInterval(50*time.Millisecond), outbox.WithBackoff(10*time.Millisecond, 10*time.Millisecond)))
	deadline := time.Now().Add(3 * time.Second)
	for rec.count() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := rec.count(); n < 2 {
		t.Errorf("%d of 2 published", n)
	}
}

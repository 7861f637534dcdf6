package outbox_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// TestRefusedTopicDoesNotStallOtherTopics: a broker that refuses one
// topic for now (no stream takes its subject, its stream is full) fails
// each batch at that topic's first message. Its messages, due again,
// are the oldest pending ones and head batch after batch; the relay must
// still publish the other topics' messages behind them at once, not one
// batch per poll interval (it used to end its run of batches at each
// batch that published nothing, so that good messages waited a poll
// interval per refused one, and none got through while refused ones were
// due: 0 of 200 in 3 s here).
func TestRefusedTopicDoesNotStallOtherTopics(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxConns int32
	}{{"pipelined", 4}, {"one connection", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testenv.PostgresPool(t, func(c *pgxpool.Config) { c.MaxConns = tc.maxConns })
			o := outbox.New(pool, outbox.WithTable(testenv.PostgresTable(t, pool, "outbox_test_")))
			if err := o.CreateSchema(context.Background()); err != nil {
				t.Fatal(err)
			}
			var msgs []outbox.Message
			good := 0
			for i := range 220 {
				m := msg("m"+strconv.Itoa(i), "k"+strconv.Itoa(i))
				if i%11 == 0 {
					m.Topic = "refused"
				} else {
					good++
				}
				msgs = append(msgs, m)
			}
			enqueue(t, pool, o, msgs...)
			rec := &recorder{fail: func(_ int, ms []outbox.Message) error {
				for i, m := range ms {
					if m.Topic == "refused" {
						return &outbox.PublishError{Index: i, Err: errors.New("no responders: no stream takes the subject")}
					}
				}
				return nil
			}}
			// The refused messages are due again at once (10 ms): they
			// are the oldest pending rows whenever a batch is claimed.
			relay := o.Relay(rec, outbox.WithBatchSize(10), outbox.WithPollInterval(time.Second),
				outbox.WithBackoff(10*time.Millisecond, 10*time.Millisecond), outbox.WithMaxAttempts(1_000_000))
			runRelay(t, relay)
			deadline := time.Now().Add(3 * time.Second)
			for rec.count() < good && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := rec.count(); n < good {
				t.Errorf("%d of %d messages of the topic the broker takes published in 3 s, want all", n, good)
			}
		})
	}
}

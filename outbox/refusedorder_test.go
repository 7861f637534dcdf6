package outbox_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// TestRefusedTopicKeepsKeyOrder: each Key's first message is of a topic
// the broker refuses for a while, its second of one it takes. The
// relay leaves the refused topic out of its claims; a Key's second
// message must still wait for its first (several workers, pipelined or
// not), and once the broker takes the topic again, its messages go out
// within about a poll interval.
func TestRefusedTopicKeepsKeyOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxConns int32
	}{{"pipelined", 10}, {"one connection", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testenv.PostgresPool(t, func(c *pgxpool.Config) { c.MaxConns = tc.maxConns })
			o := outbox.New(pool, outbox.WithTable(testenv.PostgresTable(t, pool, "outbox_test_")))
			if err := o.CreateSchema(context.Background()); err != nil {
				t.Fatal(err)
			}
			const keys = 60
			var msgs []outbox.Message
			for i := range keys {
				k := "k" + strconv.Itoa(i)
				first := msg(k+"-1", k)
				first.Topic = "refused"
				msgs = append(msgs, first, msg(k+"-2", k))
			}
			for i := range 60 { // unkeyed, behind
				msgs = append(msgs, msg("u"+strconv.Itoa(i), ""))
			}
			enqueue(t, pool, o, msgs...)
			var refusing atomic.Bool
			refusing.Store(true)
			rec := &recorder{fail: func(_ int, ms []outbox.Message) error {
				for i, m := range ms {
					if m.Topic == "refused" && refusing.Load() {
						return &outbox.PublishError{Index: i, Err: errors.New("no responders")}
					}
				}
				return nil
			}}
			const poll = 300 * time.Millisecond
			relay := o.Relay(rec, outbox.WithBatchSize(7), outbox.WithWorkers(4), outbox.WithPollInterval(poll),
				outbox.WithBackoff(10*time.Millisecond, 10*time.Millisecond), outbox.WithMaxAttempts(1_000_000))
			runRelay(t, relay)
			time.Sleep(500 * time.Millisecond)
			refusing.Store(false)
			accepted := time.Now()
			for rec.count() < len(msgs) && time.Since(accepted) < 5*time.Second {
				time.Sleep(5 * time.Millisecond)
			}
			if n := rec.count(); n < len(msgs) {
				t.Fatalf("%d of %d published", n, len(msgs))
			}
			if d := time.Since(accepted); d > 3*poll {
				t.Errorf("the refused topic's messages went out %v after the broker took it again, want about a poll interval (%v)", d, poll)
			}
			seen := map[string]bool{}
			for _, m := range rec.messages() {
				if m.Key != "" && m.Topic != "refused" && !seen[m.Key] {
					t.Errorf("%s published before its Key's first message", m.ID)
				}
				seen[m.Key] = true
			}
		})
	}
}

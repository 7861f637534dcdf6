package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// TestPipelinedRelayKeepsKeyOrderUnderFailures: a running relay claims its
// next batch while it publishes the current one, so with few Keys the next
// batch holds the rows behind those being published. A Publisher failing
// at random, wholly or from a random message on (a PublishError): no
// message is in two Publish calls at once, each Key's messages are first
// published in their order, and nothing is lost, with retries allowed
// forever and with two attempts (some messages failed, one of them
// always).
func TestPipelinedRelayKeepsKeyOrderUnderFailures(t *testing.T) {
	for _, attempts := range []int{1000, 2} {
		t.Run("attempts="+strconv.Itoa(attempts), func(t *testing.T) {
			const keys, perKey = 6, 100
			const poison = "m-3-042"
			o, pool := newOutbox(t)
			ctx := context.Background()
			for i := 0; i < perKey; i += 10 {
				var msgs []outbox.Message
				for j := i; j < i+10; j++ {
					for k := range keys {
						msgs = append(msgs, msg(fmt.Sprintf("m-%d-%03d", k, j), "k"+strconv.Itoa(k)))
					}
				}
				enqueue(t, pool, o, msgs...)
			}
			rec := &recorder{fail: func(_ int, msgs []outbox.Message) error {
				time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond) // the next claim overlaps
				// With two attempts one message always fails, so that the
				// failed path is taken in every run: chance alone once left
				// every message published (Failed was as low as 2 in 40 runs
				// before).
				if i := slices.IndexFunc(msgs, func(m outbox.Message) bool { return m.ID == poison }); i >= 0 && attempts == 2 {
					return &outbox.PublishError{Index: i, Err: errors.New("rejected")}
				}
				switch p := rand.Float64(); {
				case p < 0.3:
					return &outbox.PublishError{Index: rand.IntN(len(msgs)), Err: errors.New("no ack")}
				case p < 0.5:
					return errors.New("broker unavailable")
				}
				return nil
			}}
			runRelay(t, o.Relay(rec, outbox.WithBatchSize(20), outbox.WithMaxAttempts(attempts),
				outbox.WithBackoff(time.Millisecond, 2*time.Millisecond), outbox.WithPollInterval(5*time.Millisecond)))
			var s outbox.Stats
			testenv.Eventually(t, "nothing pending", func() bool {
				var err error
				s, err = o.Stats(ctx)
				return err == nil && s.Pending == 0
			})
			if len(rec.overlaps) > 0 {
				t.Errorf("messages in two Publish calls at once: %v", rec.overlaps)
			}
			seen := map[string]bool{}
			last := map[string]string{}
			for _, m := range rec.messages() {
				if seen[m.ID] {
					continue
				}
				seen[m.ID] = true
				if prev := last[m.Key]; strings.Compare(m.ID, prev) < 0 {
					t.Errorf("Key %s: %s first published after %s", m.Key, m.ID, prev)
				}
				last[m.Key] = m.ID
			}
			if int64(len(seen)) != s.Published || s.Published+s.Failed != keys*perKey {
				t.Errorf("%d distinct messages published, Stats %+v; want %d published or failed", len(seen), s, keys*perKey)
			}
			if attempts == 2 && s.Failed == 0 {
				t.Errorf("no message failed: the failed path was not taken (Stats %+v)", s)
			}
		})
	}
}

// TestPipelinedWorkersShareASmallPool: two Runs of a Relay (as many
// relays in one process) whose pool has two connections, so that each of
// their workers pipelines: when both ask for their connections at once,
// each gets one; neither may then wait for ever for its second.
func TestPipelinedWorkersShareASmallPool(t *testing.T) {
	o, _ := newOutbox(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 2
	small, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(small.Close)
	// The same table, through the small pool.
	table := strings.Trim(o.Table(), `"`)
	os := outbox.New(small, outbox.WithTable(table))
	// Both connections held, so that both workers wait in Acquire, then
	// get one each when they are given back.
	var held []*pgxpool.Conn
	for range 2 {
		c, err := small.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	rec := &recorder{}
	r := os.Relay(rec, outbox.WithListen(false), outbox.WithPollInterval(5*time.Millisecond), outbox.WithRetention(-1, 0, 0))
	runRelay(t, r)
	runRelay(t, r)
	time.Sleep(50 * time.Millisecond) // let both workers reach Acquire
	for _, c := range held {
		c.Release()
	}
	pool := testenv.PostgresPool(t)
	enqueue(t, pool, o, msg("m", "k"))
	testenv.Eventually(t, "the message is published", func() bool { return rec.count() == 1 })
}

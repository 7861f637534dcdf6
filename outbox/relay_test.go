package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// TestTwoRelaysKeepKeyOrderAndSkipNothing: 10,000 messages over 100 Keys,
// written by concurrent transactions that commit out of ID order (each
// waits a random moment between Enqueue and commit, and one stays open
// until the others are published), published by two relays: every message
// is published once, no message is in two Publish calls at once, and each
// Key's messages come in the order their transactions committed.
func TestTwoRelaysKeepKeyOrderAndSkipNothing(t *testing.T) {
	const keys, perTx, txs, writers = 100, 5, 2000, 16
	o, pool := newOutbox(t)
	ctx := context.Background()
	counters := testenv.PostgresTable(t, pool, "outbox_test_counters_")
	if _, err := pool.Exec(ctx, `CREATE TABLE "`+counters+`" (key text PRIMARY KEY, n int NOT NULL);
INSERT INTO "`+counters+`" SELECT 'k' || i, 0 FROM generate_series(0, 99) i`); err != nil {
		t.Fatal(err)
	}

	// The straggler: enqueued first (the lowest IDs), committed last.
	straggler, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Enqueue(ctx, straggler, msg("straggler", "")); err != nil {
		t.Fatal(err)
	}

	rec := &recorder{fail: func(int, []outbox.Message) error {
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond) // let the relays overlap
		return nil
	}}
	for range 2 {
		runRelay(t, o.Relay(rec, outbox.WithBatchSize(50), outbox.WithPollInterval(20*time.Millisecond)))
	}

	var wg sync.WaitGroup
	work := make(chan int)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				key := "k" + strconv.Itoa(rand.IntN(keys))
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					// The Key's counter, read under Enqueue's Key lock,
					// numbers the Key's transactions in commit order.
					msgs := make([]outbox.Message, perTx)
					for j := range msgs {
						msgs[j] = outbox.Message{ID: fmt.Sprintf("m-%d-%d", i, j), Topic: "t", Key: key}
					}
					if err := o.Enqueue(ctx, tx, msgs...); err != nil {
						return err
					}
					var n int
					if err := tx.QueryRow(ctx, `UPDATE "`+counters+`" SET n = n + 1 WHERE key = $1 RETURNING n`, key).Scan(&n); err != nil {
						return err
					}
					// Payloads are not written yet: the order number goes
					// into the rows just enqueued.
					if _, err := tx.Exec(ctx, `UPDATE `+o.Table()+` SET payload = convert_to($1::text || '.' || substr(id, length(id)), 'UTF8') WHERE id LIKE $2`,
						strconv.Itoa(n), fmt.Sprintf("m-%d-%%", i)); err != nil {
						return err
					}
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
					return nil
				})
				if err != nil {
					t.Errorf("transaction %d: %v", i, err)
				}
			}
		}()
	}
	for i := range txs {
		work <- i
	}
	close(work)
	wg.Wait()
	testenv.Eventually(t, "the relays publish all but the straggler", func() bool { return rec.count() >= txs*perTx })
	if err := straggler.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the straggler is published", func() bool { return rec.count() >= txs*perTx+1 })

	got := rec.messages()
	seen := map[string]int{}
	last := map[string][2]int{} // key -> (transaction order, message index) of the last one
	for _, m := range got {
		seen[m.ID]++
		if m.Key == "" {
			continue
		}
		var n, j int
		if _, err := fmt.Sscanf(string(m.Payload), "%d.%d", &n, &j); err != nil {
			t.Fatalf("payload %q: %v", m.Payload, err)
		}
		prev := last[m.Key]
		if n < prev[0] || (n == prev[0] && j <= prev[1]) {
			t.Errorf("key %s: message %d.%d published after %d.%d", m.Key, n, j, prev[0], prev[1])
		}
		last[m.Key] = [2]int{n, j}
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("message %s published %d times", id, c)
		}
	}
	if len(seen) != txs*perTx+1 || seen["straggler"] != 1 {
		t.Errorf("published %d distinct messages (straggler %d), want %d", len(seen), seen["straggler"], txs*perTx+1)
	}
	if len(rec.overlaps) > 0 {
		t.Errorf("messages held by two Publish calls at once: %q", rec.overlaps)
	}
}

// TestFailingPublisherLosesNothing: a Publisher failing on 40 % of its
// batches, with two attempts allowed: every message ends published or
// failed, never lost, and once redriven through a working Publisher every
// message is published.
func TestFailingPublisherLosesNothing(t *testing.T) {
	const n = 1000
	o, pool := newOutbox(t)
	ctx := context.Background()
	for i := 0; i < n; i += 50 {
		var msgs []outbox.Message
		for j := i; j < i+50; j++ {
			msgs = append(msgs, msg("m-"+strconv.Itoa(j), "k"+strconv.Itoa(j%10)))
		}
		enqueue(t, pool, o, msgs...)
	}
	flaky := &recorder{fail: func(int, []outbox.Message) error {
		if rand.Float64() < 0.4 {
			return errors.New("broker unavailable")
		}
		return nil
	}}
	r := o.Relay(flaky, outbox.WithBatchSize(20), outbox.WithMaxAttempts(2), outbox.WithBackoff(time.Millisecond, 2*time.Millisecond))
	testenv.Eventually(t, "nothing pending", func() bool {
		if _, err := r.RunOnce(ctx); err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		s, err := o.Stats(ctx)
		return err == nil && s.Pending == 0
	})
	s, err := o.Stats(ctx)
	if err != nil || s.Published+s.Failed != n || s.Published != int64(flaky.count()) {
		t.Fatalf("Stats = %+v, %v; want %d published or failed, %d published", s, err, n, flaky.count())
	}
	if s.Failed == 0 {
		t.Fatalf("no message failed twice: the failed path was not taken (Stats %+v)", s)
	}
	failed, err := o.Failed(ctx, n)
	if err != nil || int64(len(failed)) != s.Failed {
		t.Fatalf("Failed = %d messages, %v; want %d", len(failed), err, s.Failed)
	}
	ids := make([]string, len(failed))
	for i, f := range failed {
		if f.Attempts != 2 || f.LastError != "broker unavailable" || f.Topic != "test.event" {
			t.Errorf("failed message %+v, want 2 attempts and the publisher's error", f)
		}
		ids[i] = f.ID
	}
	if got, err := o.Redrive(ctx, ids...); err != nil || got != s.Failed {
		t.Fatalf("Redrive = %d, %v; want %d", got, err, s.Failed)
	}
	good := &recorder{}
	drain(t, o.Relay(good))
	all := map[string]bool{}
	for _, m := range append(flaky.messages(), good.messages()...) {
		all[m.ID] = true
	}
	if len(all) != n || good.count() != len(failed) {
		t.Errorf("%d distinct messages published, the redriven %d of %d; want %d", len(all), good.count(), len(failed), n)
	}
}

// TestPoisonMessageFailsAlone: a Publisher that refuses one message (a
// PublishError at its index) gets it marked failed after the limit, with
// its error; the messages before it in the batch are published, the Key's
// later ones wait behind it until it fails, and the others are not
// counted as failures.
func TestPoisonMessageFailsAlone(t *testing.T) {
	o, pool := newOutbox(t)
	ctx := context.Background()
	enqueue(t, pool, o, msg("a", "k1"), msg("poison", "k2"), msg("b", "k2"), msg("c", "k3"))
	rec := &recorder{fail: func(_ int, msgs []outbox.Message) error {
		for i, m := range msgs {
			if m.ID == "poison" {
				return &outbox.PublishError{Index: i, Err: errors.New("too large")}
			}
		}
		return nil
	}}
	r := o.Relay(rec, outbox.WithMaxAttempts(3), outbox.WithBackoff(time.Millisecond, time.Millisecond))
	testenv.Eventually(t, "nothing pending", func() bool {
		if _, err := r.RunOnce(ctx); err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		s, err := o.Stats(ctx)
		return err == nil && s.Pending == 0
	})
	order := map[string]int{}
	for i, m := range rec.messages() {
		order[m.ID] = i
	}
	if len(order) != 3 || rec.count() != 3 {
		t.Fatalf("published %v, want a, b, c once each", rec.messages())
	}
	failed, err := o.Failed(ctx, 0)
	if err != nil || len(failed) != 1 || failed[0].ID != "poison" || failed[0].Attempts != 3 ||
		!strings.HasSuffix(failed[0].LastError, ": too large") {
		t.Fatalf("Failed = %+v, %v; want poison after 3 attempts", failed, err)
	}
	if n, err := o.Redrive(ctx, "poison", "a", "unknown"); err != nil || n != 1 {
		t.Errorf("Redrive = %d, %v; want 1 (only the failed one)", n, err)
	}
}

// TestListenWakesTheRelay: with polling an hour apart, a commit is
// published because its NOTIFY wakes the relay; with LISTEN off, polling
// alone publishes it.
func TestListenWakesTheRelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []outbox.RelayOption
	}{
		{"notify", []outbox.RelayOption{outbox.WithPollInterval(time.Hour)}},
		{"polling", []outbox.RelayOption{outbox.WithListen(false), outbox.WithPollInterval(10 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, pool := newOutbox(t)
			rec := &recorder{}
			runRelay(t, o.Relay(rec, tc.opts...))
			for i := range 3 {
				if tc.name == "notify" && i == 0 {
					// Let the first look (with nothing to find) end and the
					// relay wait, so that only a notification can wake it.
					time.Sleep(50 * time.Millisecond)
				}
				enqueue(t, pool, o, msg("m"+strconv.Itoa(i), "k"))
				testenv.Eventually(t, "the message is published", func() bool { return rec.count() == i+1 })
			}
		})
	}
}

// TestPublishedRowsAreCleanedUp: rows published longer ago than the
// retention go, in batches, pending and recent ones stay.
func TestPublishedRowsAreCleanedUp(t *testing.T) {
	o, pool := newOutbox(t)
	ctx := context.Background()
	for i := range 25 {
		enqueue(t, pool, o, msg("old"+strconv.Itoa(i), ""))
	}
	drain(t, o.Relay(&recorder{}))
	if _, err := pool.Exec(ctx, `UPDATE `+o.Table()+` SET published_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	enqueue(t, pool, o, msg("recent", ""))
	drain(t, o.Relay(&recorder{}))
	enqueue(t, pool, o, msg("pending", ""))
	if n, err := o.DeletePublished(ctx, time.Hour, 10); err != nil || n != 25 {
		t.Errorf("DeletePublished = %d, %v; want 25", n, err)
	}
	if s, err := o.Stats(ctx); err != nil || s != (outbox.Stats{Pending: 1, Published: 1}) {
		t.Errorf("Stats = %+v, %v; want the recent and the pending one", s, err)
	}
	// The relay's own cleanup, and enqueueing a deleted ID again.
	if _, err := pool.Exec(ctx, `UPDATE `+o.Table()+` SET published_at = now() - interval '2 hours' WHERE state = 1`); err != nil {
		t.Fatal(err)
	}
	drain(t, o.Relay(&recorder{}))
	runRelay(t, o.Relay(&recorder{}, outbox.WithRetention(time.Hour, time.Hour, 1)))
	testenv.Eventually(t, "the relay cleans up", func() bool {
		s, err := o.Stats(ctx)
		return err == nil && s == (outbox.Stats{Published: 1}) // "pending", now published
	})
}

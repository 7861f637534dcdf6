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

// The run and the poll interval of the refusal flood tests.
const floodRun, floodPoll = 2 * time.Second, 200 * time.Millisecond

// refusedPublishCalls runs a relay of workers workers (batches of 10, a
// minute's backoff) for floodRun over 300 pending messages of distinct
// Keys, on a pool of maxConns connections, with a Publisher that refuses
// every batch at its first message, and returns how many times it called
// the Publisher.
func refusedPublishCalls(t *testing.T, maxConns int32, workers int) int {
	t.Helper()
	pool := testenv.PostgresPool(t, func(c *pgxpool.Config) { c.MaxConns = maxConns })
	o := outbox.New(pool, outbox.WithTable(testenv.PostgresTable(t, pool, "outbox_test_")))
	if err := o.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	var msgs []outbox.Message
	for i := range 300 {
		msgs = append(msgs, msg("m"+strconv.Itoa(i), "k"+strconv.Itoa(i)))
	}
	enqueue(t, pool, o, msgs...)
	rec := &recorder{fail: func(int, []outbox.Message) error {
		return &outbox.PublishError{Index: 0, Err: errors.New("maximum messages exceeded")}
	}}
	ctx, cancel := context.WithTimeout(context.Background(), floodRun)
	defer cancel()
	relay := o.Relay(rec, outbox.WithPollInterval(floodPoll), outbox.WithBackoff(time.Minute, time.Minute),
		outbox.WithBatchSize(10), outbox.WithWorkers(workers))
	if err := relay.Run(ctx); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.calls
}

// TestFailedBatchesAreNotRetriedAtOnce: a broker that refuses every
// message for now (a full stream, a subject no stream takes) fails each
// batch at its first message, the rest of the batch unknown: the relay
// puts that one off, but must not claim and hand the rest to the Publisher
// again at once, batch after batch (measured against JetStream: some 7,000
// refused publications a second for 300 pending messages), as if nothing
// had failed: after a batch that published nothing and failed for now,
// it waits for the poll interval.
func TestFailedBatchesAreNotRetriedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		maxConns int32
	}{{"pipelined", 4}, {"one connection", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			calls := refusedPublishCalls(t, tc.maxConns, 1)
			if limit := int(floodRun/floodPoll) + 3; calls > limit {
				t.Errorf("%d Publish calls in %v, each failing, want at most %d: one per poll interval", calls, floodRun, limit)
			}
		})
	}
}

// TestFailedBatchesAreNotRetriedAtOnceBySeveralWorkers: as
// TestFailedBatchesAreNotRetriedAtOnce, with four workers. A worker whose
// batch came full wakes the others before it publishes it; a worker that
// stopped after a refused batch must not be woken by another's refused
// batch into one more of its own, and so on round the workers (measured:
// about 100 refused batches in 2 s, where each worker alone waits for its
// poll interval).
func TestFailedBatchesAreNotRetriedAtOnceBySeveralWorkers(t *testing.T) {
	const workers = 4
	for _, tc := range []struct {
		name     string
		maxConns int32
	}{{"pipelined", 2 * workers}, {"one connection each", workers}} {
		t.Run(tc.name, func(t *testing.T) {
			calls := refusedPublishCalls(t, tc.maxConns, workers)
			if limit := workers * (int(floodRun/floodPoll) + 1); calls > limit {
				t.Errorf("%d Publish calls in %v by %d workers, each failing, want at most %d: one per worker and poll interval", calls, floodRun, workers, limit)
			}
		})
	}
}

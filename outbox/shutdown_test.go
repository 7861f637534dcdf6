package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
)

// shutdownPublisher signals when a batch is in Publish, then waits for the
// relay's context to end and answers with answer(msgs): as a broker client
// that does not abandon a publication already sent.
type shutdownPublisher struct {
	rec     *recorder
	entered chan struct{}
	answer  func(ctx context.Context, msgs []outbox.Message) error
}

func (p *shutdownPublisher) Publish(ctx context.Context, msgs []outbox.Message) error {
	p.rec.fail = func(int, []outbox.Message) error { return p.answer(ctx, msgs) }
	return p.rec.publishWith(msgs, func() {
		select {
		case p.entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
	})
}

// shutdownRun enqueues msgs, runs a relay on a pool of maxConns (1: the
// batches on one connection; 4: the pipelined path), stops it while its
// first batch is in Publish, and returns the outbox's Stats and each
// message's attempts after Run returned.
func shutdownRun(t *testing.T, maxConns int32, pub *shutdownPublisher, msgs ...outbox.Message) (outbox.Stats, map[string]int) {
	t.Helper()
	o, _ := newOutbox(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	table := o.Table()
	op := outbox.New(pool, outbox.WithTable(table[1:len(table)-1]))
	enqueue(t, pool, op, msgs...)

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- op.Relay(pub, outbox.WithListen(false)).Run(rctx) }()
	select {
	case <-pub.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not publish")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	s, err := op.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	attempts := map[string]int{}
	rows, err := pool.Query(ctx, `SELECT id, attempts FROM `+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		attempts[id] = n
	}
	return s, attempts
}

// A relay stopped while its batch is in Publish, which then reports the
// batch published, marks it before Run returns: a clean shutdown does not
// leave published messages pending, to be published again.
func TestShutdownMarksTheBatchPublished(t *testing.T) {
	for _, conns := range []int32{1, 4} {
		t.Run(fmt.Sprintf("conns=%d", conns), func(t *testing.T) {
			pub := &shutdownPublisher{rec: &recorder{}, entered: make(chan struct{}, 1),
				answer: func(context.Context, []outbox.Message) error { return nil }}
			s, _ := shutdownRun(t, conns, pub, msg("m", "k"))
			if n := pub.rec.count(); n != 1 {
				t.Fatalf("published %d, want 1", n)
			}
			if s != (outbox.Stats{Published: 1}) {
				t.Errorf("Stats = %+v after a clean shutdown, want the published message marked", s)
			}
		})
	}
}

// A Publish cut short by the shutdown with a *PublishError: what it
// published is marked, the rest stays pending with no attempt counted.
func TestShutdownMarksWhatAPartialPublishPublished(t *testing.T) {
	for _, conns := range []int32{1, 4} {
		t.Run(fmt.Sprintf("conns=%d", conns), func(t *testing.T) {
			pub := &shutdownPublisher{rec: &recorder{}, entered: make(chan struct{}, 1),
				answer: func(ctx context.Context, msgs []outbox.Message) error {
					return &outbox.PublishError{Index: 1, Err: ctx.Err()}
				}}
			s, attempts := shutdownRun(t, conns, pub, msg("m1", "k"), msg("m2", "k"))
			if s != (outbox.Stats{Published: 1, Pending: 1}) {
				t.Errorf("Stats = %+v, want m1 marked published and m2 pending", s)
			}
			if attempts["m2"] != 0 {
				t.Errorf("m2 has %d attempts: the shutdown was counted as its failure", attempts["m2"])
			}
		})
	}
}

// A Publish that fails because of the shutdown, without saying what it
// published, counts no attempt and marks nothing.
func TestShutdownCountsNoAttempt(t *testing.T) {
	for _, conns := range []int32{1, 4} {
		t.Run(fmt.Sprintf("conns=%d", conns), func(t *testing.T) {
			pub := &shutdownPublisher{rec: &recorder{}, entered: make(chan struct{}, 1),
				answer: func(ctx context.Context, _ []outbox.Message) error {
					return errors.Join(errors.New("broker"), ctx.Err())
				}}
			s, attempts := shutdownRun(t, conns, pub, msg("m1", "k"))
			if s != (outbox.Stats{Pending: 1}) || attempts["m1"] != 0 {
				t.Errorf("Stats = %+v, attempts %d; want m1 pending with no attempt", s, attempts["m1"])
			}
		})
	}
}

// A *PublishError whose Index is past the batch names no message that
// failed: what was published is unknown, so nothing is marked (the
// messages are published again, never lost), as outside a shutdown.
func TestShutdownMarksNothingForAPublishErrorPastTheBatch(t *testing.T) {
	pub := &shutdownPublisher{rec: &recorder{}, entered: make(chan struct{}, 1),
		answer: func(ctx context.Context, msgs []outbox.Message) error {
			return &outbox.PublishError{Index: len(msgs), Err: ctx.Err()}
		}}
	s, attempts := shutdownRun(t, 1, pub, msg("m1", "k"))
	if s != (outbox.Stats{Pending: 1}) || attempts["m1"] != 0 {
		t.Errorf("Stats = %+v, attempts %d; want m1 pending with no attempt", s, attempts["m1"])
	}
}

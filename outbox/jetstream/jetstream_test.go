package jetstream_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Postgres, testenv.NATS) }

// setup is one test's outbox, inbox, effects table and stream.
type setup struct {
	pool    *pgxpool.Pool
	o       *outbox.Outbox
	in      *outbox.Inbox
	effects string
	js      natsjs.JetStream
	stream  natsjs.Stream
	subject string // prefix of the stream's subjects
}

func newSetup(tb testing.TB) *setup {
	tb.Helper()
	s := newTables(tb)
	_, s.js, s.stream = testenv.Stream(tb, "OUTBOXJS_")
	s.subject = s.stream.CachedInfo().Config.Name + "."
	return s
}

// newSetupOn is newSetup on js (a server of the test's own), its stream
// made from cfg: the name, and the subjects "<name>.>" unless cfg has
// some, are set when cfg leaves them empty.
func newSetupOn(tb testing.TB, js natsjs.JetStream, cfg natsjs.StreamConfig) *setup {
	tb.Helper()
	s := newTables(tb)
	if cfg.Name == "" {
		cfg.Name = testenv.RandomName("OUTBOXJS_")
	}
	if len(cfg.Subjects) == 0 {
		cfg.Subjects = []string{cfg.Name + ".>"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.CreateStream(ctx, cfg)
	if err != nil {
		tb.Fatalf("create stream %s: %v", cfg.Name, err)
	}
	s.js, s.stream, s.subject = js, stream, cfg.Name+"."
	return s
}

// newTables is a setup's PostgreSQL part: its outbox, inbox and effects
// table.
func newTables(tb testing.TB) *setup {
	tb.Helper()
	ctx := context.Background()
	pool := testenv.PostgresPool(tb)
	s := &setup{pool: pool}
	s.o = outbox.New(pool, outbox.WithTable(testenv.PostgresTable(tb, pool, "outboxjs_test_")))
	s.in = outbox.NewInbox(pool, outbox.WithTable(testenv.PostgresTable(tb, pool, "outboxjs_test_inbox_")))
	s.effects = `"` + testenv.PostgresTable(tb, pool, "outboxjs_test_effects_") + `"`
	if err := s.o.CreateSchema(ctx); err != nil {
		tb.Fatal(err)
	}
	if err := s.in.CreateSchema(ctx); err != nil {
		tb.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE `+s.effects+` (message_id text NOT NULL, key text NOT NULL)`); err != nil {
		tb.Fatal(err)
	}
	return s
}

func (s *setup) consumer(tb testing.TB, name string) natsjs.Consumer {
	tb.Helper()
	c, err := s.stream.CreateOrUpdateConsumer(context.Background(), natsjs.ConsumerConfig{
		Durable: name, AckPolicy: natsjs.AckExplicitPolicy, AckWait: 2 * time.Second,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func (s *setup) count(tb testing.TB) int {
	tb.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+s.effects).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// missing returns the IDs of msgs that have no effect.
func (s *setup) missing(tb testing.TB, msgs []outbox.Message) []string {
	tb.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT DISTINCT message_id FROM `+s.effects)
	if err != nil {
		tb.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatal(err)
	}
	done := make(map[string]bool, len(ids))
	for _, id := range ids {
		done[id] = true
	}
	var out []string
	for _, m := range msgs {
		if !done[m.ID] {
			out = append(out, m.ID)
		}
	}
	return out
}

func (s *setup) enqueue(tb testing.TB, commit bool, msgs ...outbox.Message) {
	tb.Helper()
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := s.o.Enqueue(ctx, tx, msgs...); err != nil {
		tb.Fatal(err)
	}
	if commit {
		if err := tx.Commit(ctx); err != nil {
			tb.Fatal(err)
		}
	}
}

func (s *setup) effect(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+s.effects+` VALUES ($1, $2)`, m.ID, m.Key)
	return err
}

// TestEndToEndExactlyOnce: committed messages take effect exactly once at
// the consumer though the relay's batch is published twice (a relay killed
// between publishing and marking), the handler fails on its first try, and
// a message was already processed by a consumer that died before its ack;
// a rolled-back message never arrives.
func TestEndToEndExactlyOnce(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 50
	var msgs []outbox.Message
	for i := range n {
		msgs = append(msgs, outbox.Message{ID: "m-" + strconv.Itoa(i), Topic: s.subject + "created", Key: "k" + strconv.Itoa(i%5),
			Headers: map[string]string{"Trace": "t" + strconv.Itoa(i)}})
	}
	s.enqueue(t, false, outbox.Message{ID: "rolled-back", Topic: s.subject + "created"})
	s.enqueue(t, true, msgs...)

	pub := jetstream.NewPublisher(s.js)
	// The dead relay's publication: the batch reached the stream, the mark
	// never committed.
	if err := pub.Publish(ctx, msgs[:20]); err != nil {
		t.Fatal(err)
	}
	// The dead consumer's commit of m-3, without its ack.
	if _, err := s.in.Process(ctx, "mailer", "m-3", func(ctx context.Context, tx pgx.Tx) error {
		return s.effect(ctx, tx, msgs[3])
	}); err != nil {
		t.Fatal(err)
	}
	relay := s.o.Relay(pub, outbox.WithBatchSize(7))
	for {
		k, err := relay.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			break
		}
	}
	if info, err := s.stream.Info(ctx); err != nil || info.State.Msgs != n {
		t.Fatalf("stream holds %v messages (%v), want %d: the republished ones deduplicated", info.State.Msgs, err, n)
	}

	var failedOnce atomic.Bool
	var sawHeader atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- jetstream.Consume(ctx, s.consumer(t, "mailer"), s.in, func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
			if m.ID == "m-7" && failedOnce.CompareAndSwap(false, true) {
				return errors.New("smtp down")
			}
			if m.ID == "m-9" && m.Headers["Trace"] == "t9" && m.Key == "k4" {
				sawHeader.Store(true)
			}
			return s.effect(ctx, tx, m)
		})
	}()
	defer func() {
		if t.Failed() {
			t.Logf("messages without an effect: %v", s.missing(t, msgs))
		}
	}()
	testenv.Eventually(t, "every message takes effect", func() bool { return s.count(t) >= n })
	// Give redeliveries a moment to show a double, were there one.
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Consume = %v, want nil after cancel", err)
	}
	var distinct, total int
	if err := s.pool.QueryRow(context.Background(), `SELECT count(DISTINCT message_id), count(*) FROM `+s.effects).Scan(&distinct, &total); err != nil {
		t.Fatal(err)
	}
	if distinct != n || total != n {
		t.Errorf("%d effects of %d messages, want %d of %d", total, distinct, n, n)
	}
	if !failedOnce.Load() || !sawHeader.Load() {
		t.Errorf("handler failed once: %v; saw m-9's key and header: %v", failedOnce.Load(), sawHeader.Load())
	}
	var rolled int
	_ = s.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+s.effects+` WHERE message_id = 'rolled-back'`).Scan(&rolled)
	if rolled != 0 {
		t.Errorf("the rolled-back message took effect")
	}
}

// TestPublishReportsTheFailedMessage: a subject no stream takes is not
// acknowledged: Publish names the first such message.
func TestPublishReportsTheFailedMessage(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := jetstream.NewPublisher(s.js).Publish(ctx, []outbox.Message{
		{ID: "a", Topic: s.subject + "ok"}, {ID: "b", Topic: "nostream.here"}, {ID: "c", Topic: s.subject + "ok"},
	})
	var pe *outbox.PublishError
	if !errors.As(err, &pe) || pe.Index != 1 {
		t.Fatalf("Publish = %v, want a PublishError at index 1", err)
	}
}

// TestPublishRefusedMessageWaitsForTheEarlierAcks: when the client refuses
// a message at once (larger than the server's max_payload), the messages
// before it were only sent, not acknowledged: Publish must not report them
// published (PublishError.Index) before their acknowledgements came, or
// the relay marks a message the stream never took.
func TestPublishRefusedMessageWaitsForTheEarlierAcks(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	big := make([]byte, 16<<20) // above any max_payload NATS accepts (at most 8 MB)
	err := jetstream.NewPublisher(s.js).Publish(ctx, []outbox.Message{
		{ID: "a", Topic: s.subject + "ok"}, {ID: "b", Topic: "nostream.here"}, {ID: "c", Topic: s.subject + "ok", Payload: big},
	})
	var pe *outbox.PublishError
	if !errors.As(err, &pe) || pe.Index != 1 {
		t.Fatalf("Publish = %v, want a PublishError at index 1 (b was never acknowledged)", err)
	}
}

// publishN publishes n messages to the setup's "created" subject through
// the Publisher, with IDs m-0 to m-(n-1).
func (s *setup) publishN(tb testing.TB, ctx context.Context, n int) {
	tb.Helper()
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: "m-" + strconv.Itoa(i), Topic: s.subject + "created"}
	}
	if err := jetstream.NewPublisher(s.js).Publish(ctx, msgs); err != nil {
		tb.Fatal(err)
	}
}

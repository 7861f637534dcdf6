package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/examples/internal/serve"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// The example's tables, stream and consumer.
const (
	idemTable  = "example_outbox_idempotency"
	outboxTbl  = "example_outbox_events"
	inboxTbl   = "example_outbox_inbox"
	streamName = "EXAMPLE_PAYMENTS"
	subject    = "payments."
	consumer   = "notifications"
	schema     = `
CREATE TABLE IF NOT EXISTS example_payments (
	id         uuid PRIMARY KEY,
	amount     bigint NOT NULL CHECK (amount > 0),
	email      text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS example_emails (
	payment_id uuid NOT NULL,
	address    text NOT NULL,
	sent_at    timestamptz NOT NULL DEFAULT now()
);
`
)

func logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// setupDB creates every table the services use.
func setupDB(ctx context.Context, pool *pgxpool.Pool) error {
	if err := pgstore.NewTx(pool, pgstore.WithTable(idemTable)).CreateSchema(ctx); err != nil {
		return err
	}
	if err := outbox.New(pool, outbox.WithTable(outboxTbl)).CreateSchema(ctx); err != nil {
		return err
	}
	if err := outbox.NewInbox(pool, outbox.WithTable(inboxTbl)).CreateSchema(ctx); err != nil {
		return err
	}
	// Concurrent CREATE TABLE IF NOT EXISTS of one table race in
	// PostgreSQL (the loser fails with a unique_violation on pg_type), and
	// the roles start together: one transaction holding an advisory lock
	// makes them create the tables one after the other, as the stores'
	// CreateSchema do.
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('saferetry/examples/outbox', 0))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schema)
		return err
	})
}

// connectJS connects to NATS, reconnecting for ever (the fault run
// restarts the server), and makes sure of the stream.
func connectJS(ctx context.Context, natsURL string) (*nats.Conn, natsjs.JetStream, natsjs.Stream, error) {
	nc, err := nats.Connect(natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, nil, nil, err
	}
	js, err := natsjs.New(nc, natsjs.WithPublishAsyncTimeout(5*time.Second))
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	s, err := js.CreateOrUpdateStream(ctx, natsjs.StreamConfig{
		Name: streamName, Subjects: []string{subject + ">"}, Storage: natsjs.FileStorage,
		Duplicates: 2 * time.Minute,
	})
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	return nc, js, s, nil
}

// conns are the database pool and the NATS connection of a relay or a
// notification service.
type conns struct {
	pool   *pgxpool.Pool
	nc     *nats.Conn
	js     natsjs.JetStream
	stream natsjs.Stream
}

// connect opens the conns of a relay or a notification service, and
// creates the tables if needed.
func connect(ctx context.Context, dbURL, natsURL string) (*conns, error) {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	if err := setupDB(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	nc, js, s, err := connectJS(ctx, natsURL)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &conns{pool: pool, nc: nc, js: js, stream: s}, nil
}

// close closes the NATS connection, then the pool.
func (c *conns) close() {
	c.nc.Close()
	c.pool.Close()
}

// crashCountdown kills the process (SIGKILL) on the tick that takes it to
// zero; one that starts at 0 or below never does.
type crashCountdown int

func (c *crashCountdown) tick() {
	if *c > 0 {
		if *c--; *c == 0 {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
}

// runPayments serves POST /payments until ctx is done: in the middleware's
// transaction it records the payment and enqueues payment.created, whose
// ID is the request's derived key, so a retry (replayed) or a re-run after
// a rollback adds no second event. It creates the tables if needed.
func runPayments(ctx context.Context, addr, dbURL string, out io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	defer ln.Close()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := setupDB(ctx, pool); err != nil {
		return err
	}
	store := pgstore.NewTx(pool, pgstore.WithTable(idemTable))
	ob := outbox.New(pool, outbox.WithTable(outboxTbl))
	idem := idempotency.Middleware(store, idempotency.WithKeyRequired(true), idempotency.WithLogger(logger()))
	mux := http.NewServeMux()
	mux.Handle("POST /payments", idem(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pay(w, r, ob)
	})))
	fmt.Fprintf(out, "payments: listening on http://%s\n", ln.Addr())
	return serve.UntilDone(ctx, ln, mux)
}

type payment struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Email  string `json:"email"`
}

func pay(w http.ResponseWriter, r *http.Request, ob *outbox.Outbox) {
	ctx := r.Context()
	tx, ok := pgstore.TxFromContext(ctx)
	if !ok {
		http.Error(w, "no transaction", http.StatusInternalServerError)
		return
	}
	var in payment
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Amount <= 0 || in.Email == "" {
		http.Error(w, `want {"amount": > 0, "email": address}`, http.StatusBadRequest)
		return
	}
	in.ID, _ = idempotency.DerivedKey(ctx, "payment")
	if _, err := tx.Exec(ctx, `INSERT INTO example_payments (id, amount, email) VALUES ($1, $2, $3)`, in.ID, in.Amount, in.Email); err != nil {
		http.Error(w, "database error", http.StatusServiceUnavailable) // 5xx: rolled back
		return
	}
	event, _ := json.Marshal(in)
	if err := ob.Enqueue(ctx, tx, outbox.Message{Topic: subject + "created", Key: in.ID, Payload: event}); err != nil {
		http.Error(w, "database error", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(in)
}

// runRelay publishes the outbox to JetStream until ctx is done. With
// crashAfter > 0 the process kills itself (SIGKILL) right after its
// crashAfter-th successful publication, before the batch is marked.
func runRelay(ctx context.Context, dbURL, natsURL string, crashAfter int, out io.Writer) error {
	c, err := connect(ctx, dbURL, natsURL)
	if err != nil {
		return err
	}
	defer c.close()
	var pub outbox.Publisher = jetstream.NewPublisher(c.js)
	if crashAfter > 0 {
		pub = &crashingPublisher{Publisher: pub, left: crashCountdown(crashAfter)}
	}
	fmt.Fprintln(out, "relay: running")
	return outbox.New(c.pool, outbox.WithTable(outboxTbl)).Relay(pub,
		outbox.WithBatchSize(100), outbox.WithPollInterval(200*time.Millisecond),
		outbox.WithBackoff(50*time.Millisecond, time.Second), outbox.WithMaxAttempts(1000),
		outbox.WithPublishTimeout(5*time.Second), outbox.WithRelayLogger(logger())).Run(ctx)
}

type crashingPublisher struct {
	outbox.Publisher
	left crashCountdown
}

func (p *crashingPublisher) Publish(ctx context.Context, msgs []outbox.Message) error {
	err := p.Publisher.Publish(ctx, msgs)
	if err == nil {
		p.left.tick() // published, never marked
	}
	return err
}

// runNotify consumes payment.created and "sends" one e-mail per payment by
// writing a row, through the inbox. With crashAfter > 0 the process kills
// itself right after its crashAfter-th commit, before the ack.
func runNotify(ctx context.Context, dbURL, natsURL string, crashAfter int, out io.Writer) error {
	c, err := connect(ctx, dbURL, natsURL)
	if err != nil {
		return err
	}
	defer c.close()
	cons, err := c.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: consumer, AckPolicy: natsjs.AckExplicitPolicy, AckWait: 2 * time.Second,
	})
	if err != nil {
		return err
	}
	in := outbox.NewInbox(c.pool, outbox.WithTable(inboxTbl))
	left := crashCountdown(crashAfter)
	fmt.Fprintln(out, "notify: running")
	return jetstream.Consume(ctx, cons, in, func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
		var p payment
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO example_emails (payment_id, address) VALUES ($1, $2)`, p.ID, p.Email)
		return err
	}, jetstream.WithConsumeLogger(logger()), jetstream.WithBeforeAck(func(_ outbox.Message, dup bool) {
		if !dup {
			left.tick() // committed, never acked
		}
	}))
}

package jetstream_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// The messages of the lines Consume logs for a message that JetStream will
// not deliver again without its effect: an operator must see them, at
// level Error, with what names the message.
const (
	logLastFailed = "outbox/jetstream: handler failed on the message's last delivery (MaxDeliver); JetStream will not redeliver it"
	logRetrying   = "outbox/jetstream: handler failed; redelivering"
	logNoID       = "outbox/jetstream: message without Nats-Msg-Id terminated"
	logLastOnStop = "outbox/jetstream: message on its last delivery (MaxDeliver) not handled within AckWait as Consume stopped; JetStream will not redeliver it"
)

// TestHandlerFailureOnLastDeliveryIsLoggedAsError: a consumer with
// MaxDeliver 2 and a handler that always fails: the first failure is a
// warning (the message comes again), the second, on the last delivery,
// an error naming the message and the handler's error, since the message
// is then never delivered again.
func TestHandlerFailureOnLastDeliveryIsLoggedAsError(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := jetstream.NewPublisher(s.js).Publish(ctx, []outbox.Message{{ID: "doomed", Topic: s.subject + "created"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: "lastlog", AckPolicy: natsjs.AckExplicitPolicy, AckWait: 5 * time.Second, MaxDeliver: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs logRecords
	errSMTP := errors.New("smtp down")
	done := make(chan error, 1)
	go func() {
		done <- jetstream.Consume(ctx, cons, s.in, func(context.Context, pgx.Tx, outbox.Message) error { return errSMTP },
			jetstream.WithConsumeLogger(logs.logger()))
	}()
	testenv.Eventually(t, "the last delivery's failure logged", func() bool { return len(logs.find(logLastFailed)) > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Consume = %v", err)
	}
	for _, want := range []struct {
		msg   string
		level slog.Level
	}{{logRetrying, slog.LevelWarn}, {logLastFailed, slog.LevelError}} {
		recs := logs.find(want.msg)
		if len(recs) != 1 {
			t.Errorf("%q logged %d times, want once; logged: %+v", want.msg, len(recs), logs.all())
			continue
		}
		r := recs[0]
		if r.level != want.level || r.str("id") != "doomed" || !errors.Is(r.errAttr(), errSMTP) {
			t.Errorf("%q logged at %v with id %q, err %v; want %v, doomed, %v", want.msg, r.level, r.str("id"), r.errAttr(), want.level, errSMTP)
		}
	}
}

// TestMessageWithoutIDIsLoggedAsError: a message without Nats-Msg-Id
// cannot be deduplicated, so Consume terminates it, never to be
// delivered again: an error naming its subject.
func TestMessageWithoutIDIsLoggedAsError(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subject := s.subject + "anonymous"
	if _, err := s.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	var logs logRecords
	done := make(chan error, 1)
	go func() {
		done <- jetstream.Consume(ctx, s.consumer(t, "noid"), s.in, s.effect, jetstream.WithConsumeLogger(logs.logger()))
	}()
	testenv.Eventually(t, "the message without ID logged", func() bool { return len(logs.find(logNoID)) > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Consume = %v", err)
	}
	r := logs.find(logNoID)[0]
	if r.level != slog.LevelError || r.str("subject") != subject {
		t.Errorf("logged at %v with subject %q, want %v, %q", r.level, r.str("subject"), slog.LevelError, subject)
	}
	if n := s.count(t); n != 0 {
		t.Errorf("%d effects, want none", n)
	}
}

// TestLastDeliveryLostOnStopIsLoggedAsError: a consumer with MaxDeliver 1
// (every delivery its last) and a handler that outlives its context: when
// Consume stops, it handles the message in hand again, bounded by AckWait,
// and when that fails too the message is never delivered again. The error
// must name the message (its ID, as the other lines of a message do, and
// its subject) and say why it failed, for an operator to find and redo
// it.
func TestLastDeliveryLostOnStopIsLoggedAsError(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	subject := s.subject + "created"
	if err := jetstream.NewPublisher(s.js).Publish(ctx, []outbox.Message{{ID: "stuck", Topic: subject}}); err != nil {
		t.Fatal(err)
	}
	cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
		Durable: "stoplog", AckPolicy: natsjs.AckExplicitPolicy, AckWait: time.Second, MaxDeliver: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs logRecords
	entered := make(chan struct{}, 2)
	done := make(chan error, 1)
	go func() {
		done <- jetstream.Consume(ctx, cons, s.in, func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
			entered <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}, jetstream.WithConsumeLogger(logs.logger()))
	}()
	<-entered
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Consume = %v", err)
	}
	recs := logs.find(logLastOnStop)
	if len(recs) != 1 {
		t.Fatalf("%q logged %d times, want once; logged: %+v", logLastOnStop, len(recs), logs.all())
	}
	r := recs[0]
	if r.level != slog.LevelError || r.str("id") != "stuck" || r.str("subject") != subject || !errors.Is(r.errAttr(), context.DeadlineExceeded) {
		t.Errorf("logged at %v with id %q, subject %q, err %v; want %v, stuck, %q, context.DeadlineExceeded",
			r.level, r.str("id"), r.str("subject"), r.errAttr(), slog.LevelError, subject)
	}
}

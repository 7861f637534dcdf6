package jetstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox"
)

// Handler makes a message's effect through tx, the inbox's transaction
// (called from Consume's goroutine, one message at a time per Consume):
// it commits with the record that the message was processed. It must not
// commit or roll back tx. An error rolls both back and the message is
// redelivered. A panic rolls both back and goes up through Consume, which
// ends; the message is redelivered after AckWait, and those Consume
// fetched ahead (WithPrefetch) at once, but for those on their last
// delivery (MaxDeliver), which JetStream would not redeliver: Consume
// handles them first, as when it stops (see Consume). Consume logs the
// message of every panic (or runtime.Goexit) of h with its ID: at level
// Warn, or at level Error for one on its last delivery, which is not
// redelivered. A panic on one of the messages Consume handles as it
// stops, or as a panic goes up, goes up once it handled the others; of
// two panics, the later one reaches the caller (as Go has a panic in a
// deferred call replace the one going up), and the messages of both are
// logged. So h runs again after a panic of its own, before that panic
// reaches the caller: a lock it held when it panicked must be let go in a
// deferred call, or that next run waits for it, and Consume with it, for
// good.
type Handler func(ctx context.Context, tx pgx.Tx, msg outbox.Message) error

// ConsumeOption configures Consume; it may be shared between goroutines.
type ConsumeOption func(*consumeConfig)

type consumeConfig struct {
	name       string
	nakDelay   time.Duration
	progress   time.Duration // see progressInterval
	prefetch   int           // see WithPrefetch
	lastWait   time.Duration // see handleLast
	maxDeliver int           // the consumer's MaxDeliver; 0 or less: unbounded
	logger     *slog.Logger
	beforeAck  func(msg outbox.Message, duplicate bool)
}

// WithInboxConsumer names the consumer in the inbox; empty (the default)
// means the JetStream consumer's name. Instances of one logical consumer
// must share the name; two consumers that must each see every message
// need names of their own. A JetStream consumer's name is unique only
// within its stream: durable consumers of the same name on two streams
// that share one inbox table need names of their own here too, or a
// message of one stream whose explicit ID (outbox.Message.ID) is also a
// message ID of the other's is taken for a duplicate and acknowledged
// without effect (derived IDs name their Topic and do not collide).
func WithInboxConsumer(name string) ConsumeOption {
	return func(c *consumeConfig) { c.name = name }
}

// WithNakDelay sets how long JetStream waits before redelivering a message
// whose handler failed; 0 (the default) means at once.
func WithNakDelay(d time.Duration) ConsumeOption { return func(c *consumeConfig) { c.nakDelay = d } }

// WithBeforeAck sets a function called after a message's commit (or its
// recognition as a duplicate) and before its acknowledgement, from the
// consuming goroutine: for counting duplicates, or for killing a process
// at the worst moment in a fault test. nil (the default) means none.
func WithBeforeAck(f func(msg outbox.Message, duplicate bool)) ConsumeOption {
	return func(c *consumeConfig) { c.beforeAck = f }
}

// WithConsumeLogger sets where handler and acknowledgement errors are
// reported; nil means nowhere.
func WithConsumeLogger(l *slog.Logger) ConsumeOption { return func(c *consumeConfig) { c.logger = l } }

// ErrNotAckExplicit is returned at once by Consume for a consumer whose
// AckPolicy is not explicit (natsjs.AckExplicitPolicy), or whose
// configuration it cannot read (an ordered consumer): with AckNone a failed
// message is not redelivered, and with AckAll the next message's
// acknowledgement acknowledges the failed one too, so either would lose
// the effect of a message whose handler failed. Match it with errors.Is.
var ErrNotAckExplicit = errors.New("outbox/jetstream: Consume needs a consumer with AckPolicy explicit")

// Consume processes cons's messages through in until ctx is done, then
// returns nil (or until cons's NATS connection is closed, which never
// reconnects: then it returns ErrConnectionClosed; or until cons is
// deleted, or its stream: then it returns ErrConsumerDeleted), one message
// at a time: for each, h runs in Inbox.Process under the message's
// Nats-Msg-Id (whatever its bytes), and the message is acknowledged only
// after that commit (or when the inbox says duplicate). While Process runs,
// the message's AckWait is extended (InProgress every third of the
// consumer's AckWait, or of its shortest BackOff step, as Consume read them
// when called), so that JetStream does not redeliver a message whose
// handler is slow but alive. Consume asks for a message only once it is
// ready to handle it (unless WithPrefetch says otherwise), so that no
// message waits, not extended, behind a handler: a message's deliveries
// (MaxDeliver) are spent by handlings and AckWaits that its handler
// outlived, not by waiting in Consume. When h or the commit fails the
// message is negatively acknowledged, and redelivered. A crash between the
// commit and the acknowledgement makes JetStream redeliver after the
// consumer's AckWait: the inbox then says duplicate, and the message is
// acknowledged without a second effect. A message without Nats-Msg-Id
// cannot be deduplicated: it is terminated (not redelivered) and logged.
// When ctx ends, the messages Consume fetched and did not handle are
// negatively acknowledged, for JetStream to redeliver at once rather than
// after AckWait; those on their last delivery (the consumer's MaxDeliver,
// as Consume read it when called), which JetStream would not redeliver, are
// handled before Consume returns instead, each under a context that ctx's
// end does not end, bounded by the consumer's AckWait (or shortest BackOff
// step); a handler's panic on one of them goes up through Consume after
// the others are handled. Run several Consume calls, in one process or
// many, for more throughput.
//
// cons must be a pull consumer (durable or named) whose AckPolicy is
// explicit, the only policy under which a negative acknowledgement
// redelivers that message alone; for any other, Consume returns
// ErrNotAckExplicit at once and consumes nothing. Its pull requests stay
// within cons's MaxRequestBatch and MaxRequestExpires (as Consume read
// them when called; a MaxRequestExpires under 1 s is refused at once).
//
// The Message h gets is the NATS message's: ID from Nats-Msg-Id, Key from
// KeyHeader, Topic the subject (WithSubjectPrefix's prefix included), and
// Headers every NATS header, Nats-Msg-Id and Outbox-Key among them (a
// header sent more than once: its first value).
//
// A message whose handler keeps failing is redelivered without end, at
// once unless WithNakDelay says otherwise, each try a transaction opened
// and rolled back: give the JetStream consumer a MaxDeliver (and a
// BackOff), or WithNakDelay, and watch for such messages
// (WithConsumeLogger logs each failure, at level Error on the message's
// last delivery). A message whose MaxDeliver is spent is not delivered
// again, and Consume cannot tell it apart otherwise: JetStream publishes
// an advisory on $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.<stream>.<consumer>,
// to subscribe to (or count the stream's messages the consumer never
// acknowledged).
func Consume(ctx context.Context, cons natsjs.Consumer, in *outbox.Inbox, h Handler, opts ...ConsumeOption) error {
	cfg := consumeConfig{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	info := cons.CachedInfo()
	if info == nil {
		return fmt.Errorf("%w: its configuration is unknown (an ordered consumer?)", ErrNotAckExplicit)
	}
	if info.Config.AckPolicy != natsjs.AckExplicitPolicy {
		return fmt.Errorf("%w: consumer %q has AckPolicy %v", ErrNotAckExplicit, info.Name, info.Config.AckPolicy)
	}
	if cfg.name == "" {
		cfg.name = info.Name
	}
	cfg.progress = progressInterval(info.Config)
	cfg.lastWait = shortestAckWait(info.Config)
	cfg.maxDeliver = info.Config.MaxDeliver
	pull, err := pullOptions(info, cfg.prefetch)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		iter, err := cons.Messages(pull...)
		if err == nil {
			var left natsjs.Msg
			left, err = consumeIter(ctx, cons, iter, in, h, cfg)
			if ctx.Err() != nil {
				handBack(ctx, iter, left, in, h, cfg)
				return nil
			}
			iter.Stop()
		}
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, natsjs.ErrConnectionClosed):
			// A closed connection never reconnects: nothing would be
			// consumed again.
			return ErrConnectionClosed
		case errors.Is(err, ErrConsumerDeleted):
			// consumeIter saw it gone (see consumerGone).
			return ErrConsumerDeleted
		case errors.Is(err, natsjs.ErrConsumerDeleted):
			if consumerGone(ctx, cons) {
				return ErrConsumerDeleted
			}
			// Stopped on its server but not deleted (a server's
			// shutdown, a leader change): a new iterator.
		case errors.Is(err, natsjs.ErrMsgIteratorClosed):
			// Stopped: a new iterator.
		case err != nil:
			cfg.logger.Warn("outbox/jetstream: messages", "err", err)
			if !sleep(ctx, time.Second) {
				return nil
			}
		}
	}
	return nil
}

// pullOptions sizes Consume's pull requests for prefetch (see
// WithPrefetch), within the consumer's MaxRequestBatch and
// MaxRequestExpires: JetStream refuses a larger request, and nats.go's
// iterator then waits, without a message or an error, for as long as it
// runs.
func pullOptions(info *natsjs.ConsumerInfo, prefetch int) ([]natsjs.PullMessagesOpt, error) {
	n := pullMaxMessages(prefetch)
	if b := info.Config.MaxRequestBatch; b > 0 && b < n {
		n = b
	}
	opts := []natsjs.PullMessagesOpt{natsjs.PullMaxMessages(n)}
	if e := info.Config.MaxRequestExpires; e > 0 && e < natsjs.DefaultExpires {
		if e < time.Second {
			return nil, fmt.Errorf("outbox/jetstream: consumer %q has MaxRequestExpires %v: nats.go's pull requests last 1 s at least", info.Name, e)
		}
		opts = append(opts, natsjs.PullExpiry(e))
	}
	return opts, nil
}

// ErrConnectionClosed is returned by Consume when the NATS connection of
// its consumer is closed (by the application, or by nats.go once its
// MaxReconnects are spent): a closed connection never reconnects. It
// wraps nats.ErrConnectionClosed. Match it with errors.Is.
var ErrConnectionClosed = fmt.Errorf("outbox/jetstream: consume: %w", nats.ErrConnectionClosed)

// ErrConsumerDeleted is returned by Consume when its consumer was
// deleted, by itself or with its stream: it would consume nothing again,
// and a consumer made again under that name (or in a stream made again
// under that name) is another one, whose configuration Consume did not
// check (call Consume again with it). A deletion that Consume's pull
// request is not told of (its connection was down meanwhile, or the
// server does not tell of a stream's deletion) is seen once nats.go
// reports a missed heartbeat: after the pull request's expiry, 30 s, or
// the consumer's MaxRequestExpires if shorter. It wraps
// natsjs.ErrConsumerDeleted. Match it with errors.Is.
var ErrConsumerDeleted = fmt.Errorf("outbox/jetstream: consume: %w", natsjs.ErrConsumerDeleted)

// consumerGone reports whether JetStream says that cons, or its stream,
// does not exist: nats-server may also tell a pull request "consumer
// deleted" when it only stops the consumer (as some versions do on
// shutdown or a leader change), which a new pull request outlives, and
// heartbeats are missed while a server restarts, or hangs, as well as
// once the stream is deleted. A failed look-up (the server down, or not
// answering) is not taken for a deletion.
func consumerGone(ctx context.Context, cons natsjs.Consumer) bool {
	_, err := cons.Info(ctx)
	return errors.Is(err, natsjs.ErrConsumerNotFound) || errors.Is(err, natsjs.ErrStreamNotFound)
}

// consumeIter handles iter's messages until ctx is done or iter closes
// (it returns why), or cons is found deleted after a missed heartbeat
// (it returns ErrConsumerDeleted). It returns the message that ctx's end
// left unsettled, if any: taken from iter, or whose handling failed, as
// Consume stopped.
func consumeIter(ctx context.Context, cons natsjs.Consumer, iter natsjs.MessagesContext, in *outbox.Inbox, h Handler, cfg consumeConfig) (left natsjs.Msg, err error) {
	returned := false
	defer func() {
		if !returned {
			// A handler's panic goes up through Consume, which nothing
			// resumes: iter's subscription, which nobody would read any
			// more, would go on taking the messages that its pull
			// request still asks for (WithPrefetch), each held there
			// until AckWait. It ends as when Consume stops; the message
			// whose handler panicked is left to AckWait (see handle for
			// one on its last delivery).
			handBack(ctx, iter, nil, in, h, cfg)
		}
	}()
	left, err = handleAll(ctx, cons, iter, in, h, cfg)
	returned = true
	return left, err
}

// handleAll is consumeIter's loop.
func handleAll(ctx context.Context, cons natsjs.Consumer, iter natsjs.MessagesContext, in *outbox.Inbox, h Handler, cfg consumeConfig) (left natsjs.Msg, err error) {
	for {
		m, err := next(ctx, iter)
		switch {
		case ctx.Err() != nil:
			if err == nil {
				return m, nil
			}
			return nil, nil
		case errors.Is(err, natsjs.ErrMsgIteratorClosed) || errors.Is(err, natsjs.ErrConsumerDeleted):
			return nil, err
		case errors.Is(err, natsjs.ErrNoHeartbeat) && consumerGone(ctx, cons):
			// A deletion no pull request was told of (see
			// ErrConsumerDeleted): missed heartbeats are the only sign.
			return nil, ErrConsumerDeleted
		case err != nil:
			// Missed heartbeats (a server restart): the iterator goes on.
			cfg.logger.Warn("outbox/jetstream: next", "err", err)
			continue
		}
		if handle(ctx, m, in, h, cfg) != nil {
			return m, nil
		}
	}
}

// handBackWait bounds the wait for each message that handBack takes from
// the iterator's buffer.
const handBackWait = time.Second

// handBackDelay is the delay of the negative acknowledgements of
// handBack. Without one, nats-server (2.9 at least) sends the first
// message handed back straight to the stopped iterator's pull request,
// still on its books though nobody listens, where it waits out AckWait;
// with one (a millisecond is enough) it goes to a consumer that listens.
const handBackDelay = time.Millisecond

// handBack ends iter once Consume stops, or a handler's panic goes up
// through it: left (see consumeIter), if not nil, and the messages iter
// fetched (ahead, see WithPrefetch, or for the Next that ctx's end
// interrupted) that Consume did not handle are negatively acknowledged,
// so that JetStream redelivers them at once, to another instance or to
// this one restarted, rather than after the consumer's AckWait (30 s by
// default), during which nobody could have them. Those on their last
// delivery, which JetStream would not redeliver, are handled instead
// (see handleLasts).
func handBack(ctx context.Context, iter natsjs.MessagesContext, left natsjs.Msg, in *outbox.Inbox, h Handler, cfg consumeConfig) {
	var back []natsjs.Msg
	if left != nil {
		back = append(back, left)
	}
	back = append(back, drain(iter)...)
	// Only once the iterator's subscription ended: a message handed back
	// before would be redelivered to its pull request, and wait there.
	var last []natsjs.Msg
	for _, m := range back {
		if lastDelivery(m, cfg.maxDeliver) {
			last = append(last, m)
			continue
		}
		if err := m.NakWithDelay(handBackDelay); err != nil {
			// Redelivered after AckWait all the same.
			cfg.logger.Warn("outbox/jetstream: nak", "subject", m.Subject(), "err", err)
		}
	}
	handleLasts(ctx, last, in, h, cfg)
}

// handleLasts handles each of last (see handleLast). A handler's panic
// on one of them goes up through Consume only once the others were
// handled (JetStream would not redeliver them either): a deferred call
// handles them as the panic unwinds, without recovering it, so that the
// panic keeps its value and its stack. A second panic, on one of those,
// replaces the first going up (Go's rule for a panic in a deferred call),
// and the rest are handled still: handle logs each message whose handler
// panicked, so that none is lost unlogged.
func handleLasts(ctx context.Context, last []natsjs.Msg, in *outbox.Inbox, h Handler, cfg consumeConfig) {
	i := 0
	defer func() {
		if i < len(last) {
			// last[i]'s handler panicked (or called runtime.Goexit):
			// handle logged it as lost.
			handleLasts(ctx, last[i+1:], in, h, cfg)
		}
	}()
	for ; i < len(last); i++ {
		handleLast(ctx, last[i], in, h, cfg)
	}
}

// drain ends iter's subscription, and returns the messages that iter
// fetched and Consume did not take: once it returns, JetStream sends
// iter nothing more (its subscription's end waits for a round trip to the
// server, which has then dropped its interest).
func drain(iter natsjs.MessagesContext) []natsjs.Msg {
	var back []natsjs.Msg
	iter.Drain()
	for {
		m, err := iter.Next(natsjs.NextMaxWait(handBackWait))
		if err != nil {
			return back // the buffer is empty (ErrMsgIteratorClosed), or the connection is gone
		}
		back = append(back, m)
	}
}

// lastDelivery reports whether m is on the last of the consumer's
// maxDeliver deliveries (never when maxDeliver is 0 or less, unbounded):
// negatively acknowledged, or unacknowledged for AckWait, it is not
// delivered again.
func lastDelivery(m natsjs.Msg, maxDeliver int) bool {
	if maxDeliver <= 0 {
		return false
	}
	meta, err := m.Metadata()
	return err == nil && meta.NumDelivered >= uint64(maxDeliver)
}

// handleLast handles m, on its last delivery, as Consume stops (or a
// handler's panic goes up), rather than hand it back to be lost: under a context that ctx's end does not
// end, bounded by the consumer's AckWait (its shortest, see
// shortestAckWait), so that a stuck handler does not hold Consume's
// return for ever. A failure is logged with the message's ID and the
// failure, for an operator to redo its effect: the message is then lost
// as any whose last delivery failed.
func handleLast(ctx context.Context, m natsjs.Msg, in *outbox.Inbox, h Handler, cfg consumeConfig) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.lastWait)
	defer cancel()
	if err := handle(lctx, m, in, h, cfg); err != nil {
		cfg.logger.Error("outbox/jetstream: message on its last delivery (MaxDeliver) not handled within AckWait as Consume stopped; JetStream will not redeliver it",
			"id", m.Headers().Get(natsjs.MsgIDHeader), "subject", m.Subject(), "err", err)
	}
}

// handle processes m and settles it: acknowledged, terminated, or
// negatively acknowledged after a failure. A failure as ctx ends leaves m
// unsettled, to the caller (see handBack): handle returns that failure,
// and nil whenever it settled m.
func handle(ctx context.Context, m natsjs.Msg, in *outbox.Inbox, h Handler, cfg consumeConfig) (unsettled error) {
	id := m.Headers().Get(natsjs.MsgIDHeader)
	if id == "" {
		cfg.logger.Error("outbox/jetstream: message without Nats-Msg-Id terminated", "subject", m.Subject())
		_ = m.Term()
		return nil
	}
	msg := outbox.Message{ID: id, Topic: m.Subject(), Key: m.Headers().Get(KeyHeader), Payload: m.Data()}
	if len(m.Headers()) > 0 {
		msg.Headers = make(map[string]string, len(m.Headers()))
		for k := range m.Headers() {
			msg.Headers[k] = m.Headers().Get(k)
		}
	}
	stop := keepInProgress(m, cfg.progress, cfg.logger)
	// Also when h panics: a caller that recovers the panic (a
	// supervisor restarting Consume) must get m redelivered after
	// AckWait, not extended for as long as the process lives.
	defer stop()
	returned := false
	defer func() {
		switch {
		case returned:
		case lastDelivery(m, cfg.maxDeliver):
			// h panicked (the panic goes on up): m is left to AckWait,
			// after which JetStream does not deliver it again.
			cfg.logger.Error("outbox/jetstream: handler panicked on the message's last delivery (MaxDeliver); JetStream will not redeliver it",
				"id", id, "subject", m.Subject())
		default:
			// Logged too: a panic on a message that Consume handles
			// as this one goes up replaces it (see Handler), and the
			// caller never learns of this one.
			cfg.logger.Warn("outbox/jetstream: handler panicked; JetStream redelivers the message after AckWait",
				"id", id, "subject", m.Subject())
		}
	}()
	dup, err := in.Process(ctx, cfg.name, id, func(ctx context.Context, tx pgx.Tx) error {
		return h(ctx, tx, msg)
	})
	returned = true
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return err // Consume stops: handed back with the rest
		}
		if lastDelivery(m, cfg.maxDeliver) {
			cfg.logger.Error("outbox/jetstream: handler failed on the message's last delivery (MaxDeliver); JetStream will not redeliver it", "id", id, "err", err)
		} else {
			cfg.logger.Warn("outbox/jetstream: handler failed; redelivering", "id", id, "err", err)
		}
		nak := m.Nak
		if cfg.nakDelay > 0 {
			nak = func() error { return m.NakWithDelay(cfg.nakDelay) }
		}
		if err := nak(); err != nil {
			// Redelivered after AckWait all the same.
			cfg.logger.Warn("outbox/jetstream: nak", "id", id, "err", err)
		}
		return nil
	}
	if cfg.beforeAck != nil {
		cfg.beforeAck(msg, dup)
	}
	if err := m.Ack(); err != nil {
		// Redelivered after AckWait, then acknowledged as a duplicate.
		cfg.logger.Warn("outbox/jetstream: ack", "id", id, "err", err)
	}
	return nil
}

// sleep waits d or until ctx is done, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

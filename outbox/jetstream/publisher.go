package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox"
)

var _ outbox.Publisher = (*Publisher)(nil)

// KeyHeader carries Message.Key, so that a consumer can tell a message's
// Key (Consume puts it back in the Message it hands over).
const KeyHeader = "Outbox-Key"

// Publisher publishes outbox messages to JetStream: the subject is the
// prefix (WithSubjectPrefix) followed by the message's Topic, the body its
// Payload, the headers its Headers plus Nats-Msg-Id (its ID) and
// Outbox-Key (its Key). A batch is published asynchronously and Publish
// waits for every acknowledgement. A message whose Headers NATS would
// deliver changed, or refuses, whose subject is not valid, or that is
// larger than the server takes (see (*Publisher).CheckMessage), is not
// sent: Publish reports it as failed with ErrHeaderNotCarried,
// ErrInvalidSubject or ErrTooLarge, which wrap outbox.ErrUnpublishable,
// so the relay marks it failed at once. Create it
// with NewPublisher; the zero value is not usable. It is safe for
// concurrent use.
type Publisher struct {
	js     natsjs.JetStream
	prefix string
}

// PublisherOption configures NewPublisher; it may be shared between
// goroutines.
type PublisherOption func(*Publisher)

// WithSubjectPrefix puts prefix before each Topic to make the subject
// ("orders." + "payment.created"); empty (the default) means the Topic alone.
func WithSubjectPrefix(prefix string) PublisherOption {
	return func(p *Publisher) { p.prefix = prefix }
}

// NewPublisher returns a Publisher over js. The stream that takes the
// subjects must exist; its Duplicates window bounds the broker's
// deduplication.
func NewPublisher(js natsjs.JetStream, opts ...PublisherOption) *Publisher {
	p := &Publisher{js: js}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Publish implements outbox.Publisher. It returns nil once JetStream has
// acknowledged every message (a duplicate's acknowledgement counts: the
// stream has it), or an *outbox.PublishError naming the first message
// that was not acknowledged (or not sent: CheckMessage refused it, the
// messages before it acknowledged): at once when the connection is lost
// or closes (after a Drain, once it ends), else when ctx is done.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) error {
	// nats.go leaves the acknowledgements still awaited when the
	// connection closes (Close, or the end of a Drain) pending for ever:
	// wait watches for that. Registered before the first publication, so
	// that a close after it is seen; one before it fails the publications.
	nc := p.js.Conn()
	closed := nc.StatusChanged(nats.CLOSED)
	defer nc.RemoveStatusListener(closed)
	futures := make([]natsjs.PubAckFuture, 0, len(msgs))
	for i, m := range msgs {
		f, err := p.publishAsync(m)
		if err != nil {
			// The messages before i were only sent: msgs[:i] count as
			// published once they are acknowledged, not before.
			if werr := wait(ctx, futures, closed); werr != nil {
				return werr
			}
			return &outbox.PublishError{Index: i, Err: err}
		}
		futures = append(futures, f)
	}
	return wait(ctx, futures, closed)
}

// ErrTooLarge is the cause of the Publisher's error for a message larger
// than its NATS server takes (the max_payload the server announced, its
// headers and payload counted: the Publisher does not send it) or than its
// stream's MaxMsgSize (JetStream refused it). It wraps
// outbox.ErrUnpublishable, so the relay marks such a message failed at
// once rather than retry it with backoff, its Key held, up to
// WithMaxAttempts; after the limit is raised, Redrive it. Match it with
// errors.Is.
var ErrTooLarge = fmt.Errorf("outbox/jetstream: message too large for the server or its stream: %w", outbox.ErrUnpublishable)

// ErrInvalidSubject is the cause of the Publisher's error for a message
// whose subject (WithSubjectPrefix's prefix and its Topic) JetStream can
// never take: it holds white space (nats.go refuses it), an empty token
// (a leading, trailing or doubled dot: no stream takes it, not even one of
// subject ">"), a wildcard token ("*" or ">": no subject to publish to,
// though a stream would store it), starts with $JS.API.,
// $JS.<domain>.API. or $JS.ACK. (JetStream would take it for an API call
// or a consumer's acknowledgement: see controlPrefixes), or is longer
// than 3,840 bytes
// (see maxSubject: the server would close the connection). The Publisher
// does not send it. It wraps
// outbox.ErrUnpublishable, so the relay marks such a message failed at
// once. Match it with errors.Is.
var ErrInvalidSubject = fmt.Errorf("outbox/jetstream: not a subject JetStream takes: %w", outbox.ErrUnpublishable)

// CheckMessage is the package's CheckMessage, plus the subject and the
// size: it returns an error wrapping ErrInvalidSubject when the message's
// subject is not one JetStream can take, or ErrTooLarge when m's headers
// (as the Publisher sends them) and payload together are over the
// max_payload of the server the Publisher's connection is connected to
// (not checked before it first connected). Call it before Enqueue to
// refuse such a message in the request that makes it. Servers of one
// cluster may announce different limits; the one the connection is on
// when the relay publishes decides.
func (p *Publisher) CheckMessage(m outbox.Message) error {
	if err := CheckMessage(m); err != nil {
		return err
	}
	if err := checkSubject(p.prefix + m.Topic); err != nil {
		return err
	}
	if limit := p.js.Conn().MaxPayload(); limit > 0 {
		if n := int64(headerBlockSize(m)) + int64(len(m.Payload)); n > limit {
			return fmt.Errorf("%w: %d bytes of headers and payload, over the server's max_payload of %d", ErrTooLarge, n, limit)
		}
	}
	return nil
}

// maxSubject is the longest subject the Publisher sends. A longer one may
// not fit, with the reply subject and the sizes, in the server's control
// line (max_control_line: 4,096 bytes by default, not announced to
// clients; measured with nats.go's reply subjects, a subject of 4,070
// bytes overflows it), and a server whose control line overflows closes
// the connection, which nats.go does not reopen: every later message
// would fail, and every other user of the connection lose it.
const maxSubject = 3840

// checkSubject returns an error wrapping ErrInvalidSubject when subj is
// not a subject JetStream can take.
func checkSubject(subj string) error {
	if len(subj) > maxSubject {
		return fmt.Errorf("%w: the subject is %d bytes, over the %d a NATS server's control line surely holds", ErrInvalidSubject, len(subj), maxSubject)
	}
	if i := strings.IndexAny(subj, " \t\r\n"); i >= 0 {
		return fmt.Errorf("%w: %q holds %q, which NATS refuses in a subject", ErrInvalidSubject, subj, subj[i:i+1])
	}
	if subj == "" || subj[0] == '.' || subj[len(subj)-1] == '.' || strings.Contains(subj, "..") {
		return fmt.Errorf("%w: %q has an empty token, which no stream takes", ErrInvalidSubject, subj)
	}
	for tok := range strings.SplitSeq(subj, ".") {
		if tok == "*" || tok == ">" {
			return fmt.Errorf("%w: %q has the wildcard token %q, which is no subject to publish to", ErrInvalidSubject, subj, tok)
		}
	}
	for _, p := range controlPrefixes {
		if strings.HasPrefix(subj, p) {
			return fmt.Errorf("%w: %q is under %s, which JetStream reads as a command, not a message", ErrInvalidSubject, subj, p)
		}
	}
	if t := strings.SplitN(subj, ".", 4); len(t) == 4 && t[0] == "$JS" && t[2] == "API" {
		return fmt.Errorf("%w: %q is under $JS.%s.API., which JetStream reads as a command to its domain %q, not a message", ErrInvalidSubject, subj, t[1], t[1])
	}
	return nil
}

// controlPrefixes are the subjects' beginnings under which a publication
// is a command to JetStream rather than a message for a stream: its API
// (a message to $JS.API.STREAM.DELETE.<stream> deletes the stream, and
// the relay would send it again on each retry) and its consumers'
// acknowledgements (one would settle another consumer's message). The
// API of a JetStream domain, $JS.<domain>.API., is one too, which
// checkSubject refuses besides.
var controlPrefixes = []string{"$JS.API.", "$JS.ACK."}

// publishAsync sends m, or returns p.CheckMessage's error without sending
// it.
func (p *Publisher) publishAsync(m outbox.Message) (natsjs.PubAckFuture, error) {
	if err := p.CheckMessage(m); err != nil {
		return nil, err
	}
	nm := nats.NewMsg(p.prefix + m.Topic)
	nm.Data = m.Payload
	for k, v := range m.Headers {
		nm.Header.Set(k, v)
	}
	nm.Header.Set(KeyHeader, m.Key)
	// ErrMaxPayload: the connection moved to a server with a lower limit
	// since the check.
	f, err := p.js.PublishMsgAsync(nm, natsjs.WithMsgID(m.ID))
	return f, unpublishable(err)
}

// unpublishable wraps err with ErrTooLarge when it says that the message is
// larger than the server (nats.ErrMaxPayload) or its stream (MaxMsgSize)
// takes, with ErrInvalidSubject when it says its subject is not valid,
// and returns it as it is otherwise.
func unpublishable(err error) error {
	switch {
	case errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, natsjs.ErrStreamMessageExceedsMaximum):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	case errors.Is(err, nats.ErrBadSubject):
		return fmt.Errorf("%w: %w", ErrInvalidSubject, err)
	}
	return err
}

// wait waits for the acknowledgements of futures, in any order, and
// returns nil when each came, or an *outbox.PublishError naming the first
// message that was not acknowledged (those after it stay pending anyway).
// When closed receives (the connection closed), an acknowledgement not
// received by then never comes: wait does not wait for it.
func wait(ctx context.Context, futures []natsjs.PubAckFuture, closed <-chan nats.Status) error {
	for i, f := range futures {
		select {
		case <-f.Ok():
			continue
		case err := <-f.Err():
			return &outbox.PublishError{Index: i, Err: unpublishable(err)}
		case <-ctx.Done():
			return &outbox.PublishError{Index: i, Err: fmt.Errorf("waiting for the acknowledgement: %w", ctx.Err())}
		case <-closed:
		}
		for j, f := range futures[i:] {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				return &outbox.PublishError{Index: i + j, Err: unpublishable(err)}
			default:
				return &outbox.PublishError{Index: i + j, Err: fmt.Errorf("waiting for the acknowledgement: %w", nats.ErrConnectionClosed)}
			}
		}
		return nil
	}
	return nil
}

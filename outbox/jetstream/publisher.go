package jetstream

import (
	"context"
	"fmt"

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
// deliver changed, or refuses (see CheckMessage), is not sent: Publish
// reports it as failed with ErrHeaderNotCarried, which wraps
// outbox.ErrUnpublishable, so the relay marks it failed at once. Create it
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
// messages before it acknowledged), or ctx's error.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) error {
	futures := make([]natsjs.PubAckFuture, 0, len(msgs))
	for i, m := range msgs {
		f, err := p.publishAsync(m)
		if err != nil {
			// The messages before i were only sent: msgs[:i] count as
			// published once they are acknowledged, not before.
			if werr := wait(ctx, futures); werr != nil {
				return werr
			}
			return &outbox.PublishError{Index: i, Err: err}
		}
		futures = append(futures, f)
	}
	return wait(ctx, futures)
}

// publishAsync sends m, or returns CheckMessage's error without sending
// it.
func (p *Publisher) publishAsync(m outbox.Message) (natsjs.PubAckFuture, error) {
	if err := CheckMessage(m); err != nil {
		return nil, err
	}
	nm := nats.NewMsg(p.prefix + m.Topic)
	nm.Data = m.Payload
	for k, v := range m.Headers {
		nm.Header.Set(k, v)
	}
	nm.Header.Set(KeyHeader, m.Key)
	return p.js.PublishMsgAsync(nm, natsjs.WithMsgID(m.ID))
}

// wait waits for the acknowledgements of futures, in any order, and
// returns nil when each came, or an *outbox.PublishError naming the first
// message that was not acknowledged (those after it stay pending anyway).
func wait(ctx context.Context, futures []natsjs.PubAckFuture) error {
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return &outbox.PublishError{Index: i, Err: err}
		case <-ctx.Done():
			return &outbox.PublishError{Index: i, Err: fmt.Errorf("waiting for the acknowledgement: %w", ctx.Err())}
		}
	}
	return nil
}

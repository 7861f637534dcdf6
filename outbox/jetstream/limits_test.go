package jetstream_test

import (
	"context"
	"errors"
	"math"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestOverMaxPayloadIsUnpublishable: a message larger than the server's
// max_payload can never be sent as it is. The Publisher must say so
// (ErrUnpublishable), so that the relay fails it at once and publishes its
// Key's next message, rather than retry it with backoff, holding the Key,
// up to WithMaxAttempts (for ever here).
func TestOverMaxPayloadIsUnpublishable(t *testing.T) {
	srv := startNATS(t, "max_payload: 65536")
	_, js := srv.connect(t)
	s := newSetupOn(t, js, natsjs.StreamConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	big := outbox.Message{ID: "big", Topic: s.subject + "created", Key: "k", Payload: make([]byte, 70_000)}
	after := outbox.Message{ID: "after", Topic: s.subject + "created", Key: "k"}
	s.relayFailsAtOnce(t, ctx, jetstream.NewPublisher(js), big, after)
}

// TestPublisherCheckMessageSize: Publisher.CheckMessage refuses, before
// Enqueue, exactly the messages the server refuses for their size: the
// largest payload it accepts is published, one byte more is ErrTooLarge.
func TestPublisherCheckMessageSize(t *testing.T) {
	srv := startNATS(t, "max_payload: 65536")
	nc, js := srv.connect(t)
	s := newSetupOn(t, js, natsjs.StreamConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pub := jetstream.NewPublisher(js)
	m := outbox.Message{ID: "m", Topic: s.subject + "created", Key: "k", Headers: map[string]string{"Trace": "t"}}
	size := sort.Search(1<<17, func(n int) bool {
		m.Payload = make([]byte, n+1)
		return pub.CheckMessage(m) != nil
	})
	m.Payload = make([]byte, size)
	if err := pub.CheckMessage(m); err != nil {
		t.Fatalf("CheckMessage of %d bytes = %v", size, err)
	}
	if err := pub.Publish(ctx, []outbox.Message{m}); err != nil {
		t.Errorf("Publish of the largest payload CheckMessage takes (%d bytes) = %v", size, err)
	}
	m.Payload, m.ID = make([]byte, size+1), "m2"
	if err := pub.CheckMessage(m); !errors.Is(err, jetstream.ErrTooLarge) || !errors.Is(err, outbox.ErrUnpublishable) {
		t.Errorf("CheckMessage of %d bytes = %v, want ErrTooLarge", size+1, err)
	}
	var pe *outbox.PublishError
	if err := pub.Publish(ctx, []outbox.Message{m}); !errors.As(err, &pe) || !errors.Is(err, jetstream.ErrTooLarge) {
		t.Errorf("Publish of %d bytes = %v, want ErrTooLarge", size+1, err)
	}
	// The same message as the Publisher would send it: NATS refuses it too.
	nm := nats.NewMsg(m.Topic)
	nm.Data = m.Payload
	nm.Header.Set("Trace", "t")
	nm.Header.Set(jetstream.KeyHeader, m.Key)
	nm.Header.Set(natsjs.MsgIDHeader, m.ID)
	if err := nc.PublishMsg(nm); !errors.Is(err, nats.ErrMaxPayload) {
		t.Errorf("nats publish of %d bytes = %v, want ErrMaxPayload: CheckMessage refuses what NATS takes", size+1, err)
	}
}

// TestOverStreamMaxMsgSizeIsUnpublishable: a message larger than its
// stream's MaxMsgSize is refused by JetStream for as long as the stream is
// so configured: as with max_payload, the relay must fail it at once and
// go on with its Key, not retry it with backoff.
func TestOverStreamMaxMsgSizeIsUnpublishable(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := s.stream.CachedInfo().Config
	cfg.MaxMsgSize = 1000
	if _, err := s.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	big := outbox.Message{ID: "big", Topic: s.subject + "created", Key: "k", Payload: make([]byte, 2000)}
	after := outbox.Message{ID: "after", Topic: s.subject + "created", Key: "k"}
	s.relayFailsAtOnce(t, ctx, jetstream.NewPublisher(s.js), big, after)
}

// TestPublishEndsWhenItsConnectionCloses: nats.go leaves an asynchronous
// publication's acknowledgement pending for ever once its connection is
// closed (closed by the application, or at the end of a Drain): Publish
// must then end at once with the connection's error, not wait for its
// context (the relay's publish timeout, 30 s by default). The server is
// frozen so that no acknowledgement comes first (a Drain then ends after
// its DrainTimeout and nats.go's 5 s flush).
func TestPublishEndsWhenItsConnectionCloses(t *testing.T) {
	for _, end := range []string{"close", "drain"} {
		t.Run(end, func(t *testing.T) {
			srv := startNATS(t, "")
			var closedAt atomic.Pointer[time.Time]
			nc, js := srv.connect(t, nats.DrainTimeout(200*time.Millisecond), nats.ClosedHandler(func(*nats.Conn) {
				now := time.Now()
				closedAt.Store(&now)
			}))
			s := newSetupOn(t, js, natsjs.StreamConfig{})
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			pub := jetstream.NewPublisher(js)
			srv.freeze()
			defer srv.thaw()
			done := make(chan error, 1)
			go func() {
				done <- pub.Publish(ctx, []outbox.Message{{ID: "a", Topic: s.subject + "created"}, {ID: "b", Topic: s.subject + "created"}})
			}()
			time.Sleep(100 * time.Millisecond) // Publish waits for the acknowledgements
			if end == "close" {
				nc.Close()
			} else if err := nc.Drain(); err != nil {
				t.Fatal(err)
			}
			err := <-done
			returned := time.Now()
			var pe *outbox.PublishError
			if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, nats.ErrConnectionClosed) {
				t.Errorf("Publish = %v after the %s; want a PublishError at 0 wrapping nats.ErrConnectionClosed", err, end)
			}
			testenv.Eventually(t, "the closed handler runs", func() bool { return closedAt.Load() != nil })
			if late := returned.Sub(*closedAt.Load()); late > time.Second {
				t.Errorf("Publish returned %v after the connection closed, want at once", late.Round(time.Millisecond))
			}
		})
	}
}

// TestInvalidSubjectIsUnpublishable: a Topic that makes an invalid NATS
// subject (white space, which nats.go refuses; an empty token, which no
// stream takes, not even one of subject ">") can never be published: the
// relay must fail it at once and go on with its Key, not retry it with
// backoff; Publisher.CheckMessage tells it before Enqueue.
func TestInvalidSubjectIsUnpublishable(t *testing.T) {
	// The Publisher's prefix ends with a dot: ".created" makes "<stream>..created".
	for _, topic := range []string{"created.a b", "created.a\tb", "created.a..b", "created.", ".created"} {
		t.Run(topic, func(t *testing.T) {
			s := newSetup(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			bad := outbox.Message{ID: "bad", Topic: topic, Key: "k"}
			pub := jetstream.NewPublisher(s.js, jetstream.WithSubjectPrefix(s.subject))
			after := outbox.Message{ID: "after", Topic: "created", Key: "k"}
			if err := pub.CheckMessage(bad); !errors.Is(err, jetstream.ErrInvalidSubject) || !errors.Is(err, outbox.ErrUnpublishable) {
				t.Errorf("CheckMessage(bad) = %v, want ErrInvalidSubject", err)
			}
			if err := pub.CheckMessage(after); err != nil {
				t.Errorf("CheckMessage(after) = %v", err)
			}
			s.relayFailsAtOnce(t, ctx, pub, bad, after)
		})
	}
}

// TestSubjectOverTheControlLineIsUnpublishable: a subject longer than the
// server's max_control_line (4 KiB by default) makes the server close the
// connection, which nats.go does not reopen: one such message would end
// the Publisher's connection (and every other user's of it) for good, and
// every later message would fail. The Publisher must refuse it without
// sending it, and the relay fail it at once and go on with its Key.
func TestSubjectOverTheControlLineIsUnpublishable(t *testing.T) {
	srv := startNATS(t, "")
	nc, js := srv.connect(t)
	s := newSetupOn(t, js, natsjs.StreamConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pub := jetstream.NewPublisher(js)
	long := outbox.Message{ID: "long", Topic: s.subject + strings.Repeat("a", 5000), Key: "k"}
	after := outbox.Message{ID: "after", Topic: s.subject + "created", Key: "k"}
	s.relayFailsAtOnce(t, ctx, pub, long, after)
	if nc.IsClosed() {
		t.Errorf("the connection is closed for good")
	}
	// The longest subject the Publisher sends goes through.
	longest := outbox.Message{ID: "longest", Topic: s.subject + strings.Repeat("a", 3840-len(s.subject))}
	if err := pub.Publish(ctx, []outbox.Message{longest}); err != nil || nc.IsClosed() {
		t.Errorf("Publish of a 3,840-byte subject = %v (connection closed: %v)", err, nc.IsClosed())
	}
}

// relayFailsAtOnce enqueues bad and then after, of one Key, runs pub's
// relay three times (a minute's backoff, attempts without limit) and
// checks that bad was failed at its first attempt and after published: a
// message the broker can never take as it is must not hold its Key.
func (s *setup) relayFailsAtOnce(t *testing.T, ctx context.Context, pub outbox.Publisher, bad, after outbox.Message) {
	t.Helper()
	s.enqueue(t, true, bad, after)
	relay := s.o.Relay(pub, outbox.WithMaxAttempts(math.MaxInt32), outbox.WithBackoff(time.Minute, time.Minute))
	for range 3 {
		if _, err := relay.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	failed, err := s.o.Failed(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || failed[0].ID != bad.ID || failed[0].Attempts != 1 {
		t.Errorf("Failed = %+v, want %s, failed after 1 attempt", failed, bad.ID)
	}
	// The stream may hold after already (sent in bad's batch), but only its
	// row says whether the relay counts it published.
	if st, err := s.o.Stats(ctx); err != nil || st.Published != 1 {
		t.Errorf("Stats = %+v (%v), want 1 published: the Key's next message", st, err)
	}
}

package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestWildcardOrAPISubjectIsUnpublishable: a subject with a wildcard token
// ("*" or ">") is no publish subject (the stream stored it as it was, a
// message that subject filters and subscriptions misread), one under
// $JS.API. is a JetStream API call, not a message ("$JS.API.STREAM.DELETE.
// <stream>" deleted the stream, and the relay would call it again on each
// retry), as is one under $JS.<domain>.API. (the API of the JetStream
// domain <domain>), and one under $JS.ACK. a consumer's acknowledgement.
// The Publisher must refuse them without sending them, and the relay fail
// them at once and go on with their Key; a token merely holding "*" or
// ">" ("a*") is an ordinary subject, and so are those that merely look
// alike ("$JSX.API.b", "$JS.hub.APIX.b", "$KV.b.c", "a.$JS.hub.API.b").
func TestWildcardOrAPISubjectIsUnpublishable(t *testing.T) {
	for name, topic := range map[string]func(stream string) string{
		"star last":   func(st string) string { return st + ".created.*" },
		"star inside": func(st string) string { return st + ".*.created" },
		"gt":          func(st string) string { return st + ".>" },
		"gt last":     func(st string) string { return st + ".created.>" },
		"api":         func(st string) string { return "$JS.API.STREAM.DELETE." + st },
		"domain api":  func(st string) string { return "$JS.hub.API.STREAM.DELETE." + st },
		"ack":         func(st string) string { return "$JS.ACK." + st + ".c.1.1.1.0.0" },
	} {
		t.Run(name, func(t *testing.T) {
			s := newSetup(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			stream := s.stream.CachedInfo().Config.Name
			pub := jetstream.NewPublisher(s.js)
			bad := outbox.Message{ID: "bad", Topic: topic(stream), Key: "k"}
			after := outbox.Message{ID: "after", Topic: s.subject + "created", Key: "k"}
			if err := pub.CheckMessage(bad); !errors.Is(err, jetstream.ErrInvalidSubject) || !errors.Is(err, outbox.ErrUnpublishable) {
				t.Errorf("CheckMessage(%q) = %v, want ErrInvalidSubject", bad.Topic, err)
			}
			s.relayFailsAtOnce(t, ctx, pub, bad, after)
			switch info, err := s.stream.Info(ctx); {
			case err != nil:
				t.Errorf("the stream: %v; want it holding after alone", err)
			case info.State.Msgs != 1:
				t.Errorf("the stream holds %d messages, want 1 (after)", info.State.Msgs)
			}
		})
	}
	t.Run("literal", func(t *testing.T) {
		s := newSetup(t)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		pub := jetstream.NewPublisher(s.js)
		for _, topic := range []string{"a*", "a>", "*a", ">a", "a.$JS.API.b", "a.$JS.hub.API.b"} {
			m := outbox.Message{ID: topic, Topic: s.subject + topic}
			if err := pub.CheckMessage(m); err != nil {
				t.Errorf("CheckMessage(%q) = %v, want nil", m.Topic, err)
			}
			if err := pub.Publish(ctx, []outbox.Message{m}); err != nil {
				t.Errorf("Publish(%q) = %v, want nil", m.Topic, err)
			}
		}
		// No stream takes these here: checked, not published.
		for _, topic := range []string{"$JSX.API.b", "$JS.hub.APIX.b", "$JS.hubAPI.b", "$KV.b.c", "$JS.EVENT.ADVISORY.b"} {
			if err := pub.CheckMessage(outbox.Message{ID: topic, Topic: topic}); err != nil {
				t.Errorf("CheckMessage(%q) = %v, want nil", topic, err)
			}
		}
	})
}

package jetstream_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestConsumeEndsWhenItsStreamIsDeleted: deleting a stream deletes its
// consumers. Consume could then consume nothing ever again, so it must
// return ErrConsumerDeleted, not go on until its context ends: whether
// its pull request is told "409 Consumer Deleted" (as nats-server 2.9
// does, though the consumer's look-up then says "stream not found", not
// "consumer not found") or nothing (its connection was down meanwhile,
// or a server that does not tell), when nats.go reports missed heartbeats
// alone. A server restart or hang, which misses heartbeats too, must not
// end it. The consumer's MaxRequestExpires of 1 s makes nats.go's
// heartbeats 500 ms apart, and a heartbeat missed after 1 s.
func TestConsumeEndsWhenItsStreamIsDeleted(t *testing.T) {
	for _, how := range []string{"stream deleted", "stream deleted while disconnected", "server restarted", "server hung"} {
		t.Run(how, func(t *testing.T) {
			srv := startNATS(t, "")
			_, js := srv.connect(t)
			// Consume's connection goes through a proxy, which can keep
			// it away from the server.
			proxy := testenv.StartProxy(t, srv.addr())
			pnc, err := nats.Connect("nats://"+proxy.Addr(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer pnc.Close()
			pjs, err := natsjs.New(pnc)
			if err != nil {
				t.Fatal(err)
			}
			s := newSetupOn(t, js, natsjs.StreamConfig{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			stream := s.stream.CachedInfo().Config.Name
			cons, err := pjs.CreateOrUpdateConsumer(ctx, stream, natsjs.ConsumerConfig{
				Durable: "c", AckPolicy: natsjs.AckExplicitPolicy, AckWait: 2 * time.Second,
				MaxRequestExpires: time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			var logs logRecords
			done := make(chan error, 1)
			go func() {
				done <- jetstream.Consume(ctx, cons, s.in, s.effect, jetstream.WithConsumeLogger(logs.logger()))
			}()
			time.Sleep(200 * time.Millisecond) // Consume waits for messages
			if how == "stream deleted" || how == "stream deleted while disconnected" {
				if how == "stream deleted while disconnected" {
					proxy.SetRefuse(true)
					proxy.Cut()
				}
				if err := js.DeleteStream(ctx, stream); err != nil {
					t.Fatal(err)
				}
				proxy.SetRefuse(false)
				select {
				case err := <-done:
					if !errors.Is(err, jetstream.ErrConsumerDeleted) || !errors.Is(err, natsjs.ErrConsumerDeleted) {
						t.Errorf("Consume = %v, want ErrConsumerDeleted", err)
					}
				case <-time.After(5 * time.Second):
					t.Errorf("Consume still runs 5 s after its stream was deleted")
					cancel()
					<-done
				}
				return
			}
			// Down, or hung (its connections open), long enough for
			// heartbeats to be missed, and up again on its store: the
			// stream and its consumer are there.
			if how == "server restarted" {
				srv.kill()
				time.Sleep(1500 * time.Millisecond)
				srv.start()
			} else {
				srv.freeze()
				time.Sleep(1500 * time.Millisecond)
				srv.thaw()
			}
			time.Sleep(1500 * time.Millisecond)
			select {
			case err := <-done:
				t.Fatalf("Consume = %v after a server restart, want it going on", err)
			default:
			}
			// A hung server's missed heartbeats are a warning: the
			// server, not the consumer, is in trouble (a restart's are
			// not missed: nats.go stops their watch while disconnected).
			var missed []logged
			for _, r := range logs.find("outbox/jetstream: next") {
				if errors.Is(r.errAttr(), natsjs.ErrNoHeartbeat) {
					missed = append(missed, r)
				}
			}
			if how == "server hung" && (len(missed) == 0 || missed[0].level != slog.LevelWarn) {
				t.Errorf("missed heartbeats logged %+v, want a warning wrapping natsjs.ErrNoHeartbeat; logged: %+v", missed, logs.all())
			}
			if _, err := js.Publish(ctx, s.subject+"after", nil, natsjs.WithMsgID("after")); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for s.count(t) == 0 && time.Now().Before(deadline) {
				time.Sleep(50 * time.Millisecond)
			}
			if n := s.count(t); n != 1 {
				t.Errorf("%d effects after the restart, want 1", n)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Consume = %v, want nil once its context ended", err)
			}
		})
	}
}

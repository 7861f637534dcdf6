package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// TestConsumeEndsWhenItsConnectionCloses: a closed NATS connection never
// reconnects (closed by the application, or by nats.go once its
// MaxReconnects are spent in an outage): Consume, which could then consume
// nothing ever again, must return an error saying so, not go on logging a
// failure every second until its context ends.
func TestConsumeEndsWhenItsConnectionCloses(t *testing.T) {
	for _, how := range []string{"closed", "reconnects spent"} {
		t.Run(how, func(t *testing.T) {
			srv := startNATS(t, "")
			nc, js := srv.connect(t, nats.MaxReconnects(2), nats.ReconnectWait(50*time.Millisecond))
			s := newSetupOn(t, js, natsjs.StreamConfig{})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cons := s.consumer(t, "c")
			done := make(chan error, 1)
			go func() {
				done <- jetstream.Consume(ctx, cons, s.in, func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
					return s.effect(ctx, tx, m)
				})
			}()
			time.Sleep(200 * time.Millisecond) // Consume waits for messages
			if how == "closed" {
				nc.Close()
			} else {
				srv.kill()
			}
			select {
			case err := <-done:
				if !errors.Is(err, nats.ErrConnectionClosed) {
					t.Errorf("Consume = %v, want an error wrapping nats.ErrConnectionClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("Consume still runs 5 s after its connection closed (closed: %v)", nc.IsClosed())
				cancel()
				<-done
			}
		})
	}
}

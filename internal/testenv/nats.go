package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func checkNATS(ctx context.Context, rawURL string) error {
	deadline, _ := ctx.Deadline()
	nc, err := nats.Connect(rawURL, nats.Timeout(time.Until(deadline)), nats.MaxReconnects(0))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.AccountInfo(ctx)
	return err
}

// Stream connects to SAFERETRY_NATS_URL (skipping tb as NATSURL does) and
// creates a JetStream stream of tb's own, named RandomName(name) (name
// must be a valid stream name), taking the subjects "<stream>.>"; it is
// deleted and the connection closed when tb ends. It returns the
// connection, its JetStream context and the stream. A creation that the
// server refuses for a race of its own is tried again (see createStream).
func Stream(tb testing.TB, name string) (*nats.Conn, jetstream.JetStream, jetstream.Stream) {
	tb.Helper()
	url := NATSURL(tb)
	nc, err := nats.Connect(url)
	if err != nil {
		Unavailable(tb, "nats unreachable ("+err.Error()+"); start it to run")
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("testenv: jetstream: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sname := RandomName(name)
	s, err := createStream(ctx, tb, func() (jetstream.Stream, error) {
		return js.CreateStream(ctx, jetstream.StreamConfig{Name: sname, Subjects: []string{sname + ".>"}})
	})
	if err != nil {
		tb.Fatalf("testenv: create stream %s: %v", sname, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, sname); err != nil {
			tb.Errorf("testenv: delete stream %s: %v", sname, err)
		}
	})
	return nc, js, s
}

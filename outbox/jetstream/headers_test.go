package jetstream_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// headerCases are header sets measured against a real NATS server
// (nats.go v1.55): the client trims a value's leading and trailing spaces
// and tabs and turns CR and LF into spaces without a word, the header the
// Publisher sets itself (Nats-Msg-Id, Outbox-Key) replaces a user's of
// that name, the client refuses a name outside printable ASCII or with a
// separator, and the server refuses a header block over 64 KiB and reads
// Nats-* names as directives (Nats-Expected-Stream: refused). Names that
// differ only in case, inner tabs, control characters, non-ASCII UTF-8 and
// empty values arrive as they were sent.
var headerCases = []map[string]string{
	{"x-a": "1", "X-A": "2"},
	{"a b": "v"},
	{"a:b": "v"},
	{"é": "v"},
	{"": "v"},
	{"V": " lead"},
	{"V": "trail "},
	{"V": "\tlead"},
	{"V": "trail\t"},
	{"V": "in\tside"},
	{"V": "a\rb"},
	{"V": "a\nb"},
	{"V": "a\r\nb"},
	{"V": "ünï €"},
	{"V": ""},
	{"V": "a\x01b\x7f"},
	{"V": strings.Repeat("x", 70000)},
	{"Nats-Msg-Id": "user"},
	{"nats-msg-id": "user"},
	{"Outbox-Key": "user"},
	{"OUTBOX-KEY": "user"},
	{"Nats-Expected-Stream": "nope"},
}

// TestHeadersArriveUnchangedOrFailAtOnce: a message's Headers go from
// Enqueue through the relay, the Publisher and JetStream to Consume. Each
// must arrive as it was enqueued (with Nats-Msg-Id and Outbox-Key, and
// nothing else, beside it), or be refused: by Enqueue, or by the
// Publisher so that the relay marks the message failed at once (listed by
// Failed, not published changed), its Key's next message published all
// the same, also under a WithMaxAttempts that never gives up.
func TestHeadersArriveUnchangedOrFailAtOnce(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	topic := s.subject + "h"
	refused := map[int]bool{}
	for i, h := range headerCases {
		id, key := "h"+strconv.Itoa(i), "k"+strconv.Itoa(i)
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			return s.o.Enqueue(ctx, tx, outbox.Message{ID: id, Topic: topic, Key: key, Headers: h})
		})
		switch {
		case errors.Is(err, outbox.ErrInvalidMessage):
			refused[i] = true
		case err != nil:
			t.Fatalf("Enqueue(%q) = %v", h, err)
		}
		s.enqueue(t, true, outbox.Message{ID: id + "-after", Topic: topic, Key: key, Headers: map[string]string{"After": "1"}})
	}
	relay := s.o.Relay(jetstream.NewPublisher(s.js), outbox.WithMaxAttempts(math.MaxInt32), outbox.WithBackoff(time.Minute, time.Minute))
	for {
		n, err := relay.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT id FROM `+s.o.Table()+` WHERE state = 1`)
	if err != nil {
		t.Fatal(err)
	}
	published, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]string{}
	fs, err := s.o.Failed(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		failed[f.ID] = f.LastError
	}

	var mu sync.Mutex
	got := map[string]outbox.Message{}
	done := make(chan error, 1)
	go func() {
		done <- jetstream.Consume(ctx, s.consumer(t, "headers"), s.in, func(ctx context.Context, tx pgx.Tx, m outbox.Message) error {
			mu.Lock()
			defer mu.Unlock()
			got[m.ID] = m
			return nil
		})
	}()
	testenv.Eventually(t, "every published message is consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range published {
			if _, ok := got[id]; !ok {
				return false
			}
		}
		return true
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Consume = %v, want nil after cancel", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, sent := range headerCases {
		id, key := "h"+strconv.Itoa(i), "k"+strconv.Itoa(i)
		if _, ok := got[id+"-after"]; !ok {
			t.Errorf("%.60q: the next message of its Key did not arrive (its Key blocked)", sent)
		}
		m, arrived := got[id]
		switch {
		case refused[i]:
		case arrived:
			if d := headerDiff(sent, m.Headers, id, key); d != "" {
				t.Errorf("%.60q arrived changed: %s", sent, d)
			}
		case failed[id] != "":
			t.Logf("%.60q failed: %.200s", sent, failed[id])
		default:
			t.Errorf("%.60q neither arrived nor was refused: pending, retried with backoff", sent)
		}
	}
}

// headerDiff says how got, a consumed message's headers, differs from sent
// plus the Publisher's Nats-Msg-Id (id) and Outbox-Key (key); "" if not.
func headerDiff(sent, got map[string]string, id, key string) string {
	want := map[string]string{natsjs.MsgIDHeader: id, jetstream.KeyHeader: key}
	var diffs []string
	for k, v := range sent {
		if w, ok := want[k]; ok && w != v {
			diffs = append(diffs, "header "+strconv.Quote(k)+" is also the Publisher's")
		}
		want[k] = v
	}
	for k, v := range want {
		if g, ok := got[k]; !ok {
			diffs = append(diffs, "header "+strconv.Quote(k)+" lost")
		} else if g != v {
			diffs = append(diffs, "header "+strconv.Quote(k)+": "+trunc(v)+" arrived as "+trunc(g))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, "header "+strconv.Quote(k)+" added")
		}
	}
	return strings.Join(diffs, "; ")
}

func trunc(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "..."
	}
	return strconv.Quote(s)
}

// TestPublishRefusesAHeaderNATSWouldChange: the Publisher sends none of a
// message whose header NATS would change, and reports it as unpublishable
// at its index, the messages before it acknowledged.
func TestPublishRefusesAHeaderNATSWouldChange(t *testing.T) {
	s := newSetup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := jetstream.NewPublisher(s.js).Publish(ctx, []outbox.Message{
		{ID: "a", Topic: s.subject + "ok"},
		{ID: "b", Topic: s.subject + "ok", Headers: map[string]string{"V": "trail "}},
		{ID: "c", Topic: s.subject + "ok"},
	})
	var pe *outbox.PublishError
	if !errors.As(err, &pe) || pe.Index != 1 || !errors.Is(err, jetstream.ErrHeaderNotCarried) || !errors.Is(err, outbox.ErrUnpublishable) {
		t.Fatalf("Publish = %v, want a PublishError at index 1 wrapping ErrHeaderNotCarried and ErrUnpublishable", err)
	}
	if info, err := s.stream.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Errorf("stream holds %v messages (%v), want 1 (a)", info.State.Msgs, err)
	}
}

// TestCheckMessage holds CheckMessage to the measured rules, at their
// edges: headerCases' outcomes, and the header block's size limit.
func TestCheckMessage(t *testing.T) {
	carried := map[int]bool{0: true, 9: true, 13: true, 14: true, 15: true}
	for i, h := range headerCases {
		err := jetstream.CheckMessage(outbox.Message{ID: "m", Topic: "t", Headers: h})
		if carried[i] != (err == nil) || err != nil && !errors.Is(err, jetstream.ErrHeaderNotCarried) {
			t.Errorf("CheckMessage(%.60q) = %v, want carried %v", h, err, carried[i])
		}
	}
	// "NATS/1.0\r\n" 10, "V: ...\r\n" 5+n, "Nats-Msg-Id: m\r\n" 16,
	// "Outbox-Key: \r\n" 14, "\r\n" 2: 65,535 bytes with n = 65488.
	for n, ok := range map[int]bool{65488: true, 65489: false} {
		err := jetstream.CheckMessage(outbox.Message{ID: "m", Topic: "t", Headers: map[string]string{"V": strings.Repeat("x", n)}})
		if ok != (err == nil) {
			t.Errorf("CheckMessage(value of %d bytes) = %v, want carried %v", n, err, ok)
		}
	}
}

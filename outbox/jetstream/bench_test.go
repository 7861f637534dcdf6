package jetstream_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/saferetry/saferetry/outbox"
	"github.com/saferetry/saferetry/outbox/jetstream"
)

// benchMessages returns n messages of 200 bytes over 100 Keys, their IDs
// prefixed so that two runs into one stream are not deduplicated.
func benchMessages(prefix, subject string, n int) []outbox.Message {
	payload := make([]byte, 200)
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: prefix + strconv.Itoa(i), Topic: subject + "bench", Key: "k" + strconv.Itoa(i%100), Payload: payload}
	}
	return msgs
}

// countingPublisher counts the messages published.
type countingPublisher struct {
	outbox.Publisher
	n atomic.Int64
}

func (p *countingPublisher) Publish(ctx context.Context, msgs []outbox.Message) error {
	err := p.Publisher.Publish(ctx, msgs)
	if err == nil {
		p.n.Add(int64(len(msgs)))
	}
	return err
}

// BenchmarkRelayVsRaw publishes b.N messages (200 bytes, 100 Keys) through
// a relay at each batch size, with one worker and with four, and the same
// messages straight to JetStream (async publish of a batch, then every ack
// awaited, as the Publisher does) in the same run: relay_msgs/s,
// raw_msgs/s and relay_%_of_raw.
func BenchmarkRelayVsRaw(b *testing.B) {
	for _, batch := range []int{1, 100, 1000} {
		for _, workers := range []int{1, 4} {
			b.Run("batch="+strconv.Itoa(batch)+"/workers="+strconv.Itoa(workers), func(b *testing.B) {
				s := newSetup(b)
				msgs := benchMessages("relay-", s.subject, b.N)
				for chunk := range slices.Chunk(msgs, 1000) {
					s.enqueue(b, true, chunk...)
				}
				pub := &countingPublisher{Publisher: jetstream.NewPublisher(s.js)}
				ctx, cancel := context.WithCancel(context.Background())
				relay := s.o.Relay(pub, outbox.WithBatchSize(batch), outbox.WithWorkers(workers))
				b.ResetTimer()
				start := time.Now()
				done := make(chan struct{})
				go func() { defer close(done); _ = relay.Run(ctx) }()
				for pub.n.Load() < int64(b.N) {
					time.Sleep(100 * time.Microsecond)
				}
				relayRate := float64(b.N) / time.Since(start).Seconds()
				b.StopTimer()
				cancel()
				<-done

				raw := benchMessages("raw-", s.subject, b.N)
				start = time.Now()
				for chunk := range slices.Chunk(raw, batch) {
					futures := make([]natsjs.PubAckFuture, 0, len(chunk))
					for _, m := range chunk {
						nm := nats.NewMsg(m.Topic)
						nm.Data = m.Payload
						nm.Header.Set(jetstream.KeyHeader, m.Key)
						f, err := s.js.PublishMsgAsync(nm, natsjs.WithMsgID(m.ID))
						if err != nil {
							b.Fatal(err)
						}
						futures = append(futures, f)
					}
					for _, f := range futures {
						select {
						case <-f.Ok():
						case err := <-f.Err():
							b.Fatal(err)
						}
					}
				}
				rawRate := float64(b.N) / time.Since(start).Seconds()
				b.ReportMetric(relayRate, "relay_msgs/s")
				b.ReportMetric(rawRate, "raw_msgs/s")
				b.ReportMetric(100*relayRate/rawRate, "relay_%_of_raw")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// timingPublisher reports when each message's publication was acknowledged.
type timingPublisher struct {
	outbox.Publisher
	mu      sync.Mutex
	waiters map[string]chan time.Time
}

func (p *timingPublisher) Publish(ctx context.Context, msgs []outbox.Message) error {
	err := p.Publisher.Publish(ctx, msgs)
	now := time.Now()
	if err == nil {
		p.mu.Lock()
		for _, m := range msgs {
			if c, ok := p.waiters[m.ID]; ok {
				c <- now
				delete(p.waiters, m.ID)
			}
		}
		p.mu.Unlock()
	}
	return err
}

func (p *timingPublisher) wait(id string) chan time.Time {
	c := make(chan time.Time, 1)
	p.mu.Lock()
	p.waiters[id] = c
	p.mu.Unlock()
	return c
}

// BenchmarkCommitToPublish measures, one message at a time, from the
// enqueueing transaction's commit to JetStream's ack of the message, with
// a relay woken by LISTEN/NOTIFY and with one polling every 100 ms:
// p50_ms and p99_ms.
func BenchmarkCommitToPublish(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []outbox.RelayOption
	}{
		{"notify", nil},
		{"polling_100ms", []outbox.RelayOption{outbox.WithListen(false), outbox.WithPollInterval(100 * time.Millisecond)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := newSetup(b)
			ctx, cancel := context.WithCancel(context.Background())
			pub := &timingPublisher{Publisher: jetstream.NewPublisher(s.js), waiters: map[string]chan time.Time{}}
			done := make(chan struct{})
			go func() { defer close(done); _ = s.o.Relay(pub, tc.opts...).Run(ctx) }()
			defer func() { cancel(); <-done }()
			time.Sleep(100 * time.Millisecond) // the relay listens
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				id := "lat-" + strconv.Itoa(i)
				c := pub.wait(id)
				var committed time.Time
				err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
					return s.o.Enqueue(ctx, tx, outbox.Message{ID: id, Topic: s.subject + "lat", Key: "k"})
				})
				committed = time.Now()
				if err != nil {
					b.Fatal(err)
				}
				select {
				case at := <-c:
					lat = append(lat, at.Sub(committed))
				case <-time.After(10 * time.Second):
					b.Fatalf("message %s not published", id)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50_ms")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99_ms")
		})
	}
}

// BenchmarkInboxOverhead commits one message's effect (an INSERT) through
// Inbox.Process and one in a plain transaction per operation, alternating
// so that both see the same load: inbox_us, plain_us and overhead_us per
// message.
func BenchmarkInboxOverhead(b *testing.B) {
	s := newSetup(b)
	ctx := context.Background()
	effect := func(ctx context.Context, tx pgx.Tx, id string) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+s.effects+` VALUES ($1, 'k')`, id)
		return err
	}
	var inbox, plain time.Duration
	for i := range b.N {
		id := strconv.Itoa(i)
		start := time.Now()
		if _, err := s.in.Process(ctx, "bench", id, func(ctx context.Context, tx pgx.Tx) error { return effect(ctx, tx, "inbox-"+id) }); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return effect(ctx, tx, "plain-"+id) }); err != nil {
			b.Fatal(err)
		}
		inbox += mid.Sub(start)
		plain += time.Since(mid)
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(us(inbox), "inbox_us")
	b.ReportMetric(us(plain), "plain_us")
	b.ReportMetric(us(inbox-plain), "overhead_us")
}

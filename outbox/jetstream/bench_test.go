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

	"github.com/saferetry/saferetry/internal/benchratio"
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

// BenchmarkRelayVsRaw compares, in one run, the relay's throughput with
// raw JetStream publishing of the same messages (200 bytes over 100 Keys),
// at batch sizes 1, 100 and 1000, with one worker and with four. It
// alternates rounds of each (benchratio.RunTimed, 4 rounds of b.N/4
// messages; run it with -benchtime=40000x, so that a round holds ten
// batches of 1000 and the relay's start and last marks weigh little):
//
//   - relay: the round's messages are enqueued and committed (not timed),
//     then a relay is started with WithBatchSize(batch) and
//     WithWorkers(workers) and timed until every message is published and
//     marked published. It is started with its messages pending and does
//     not listen: the wake-up is not what is measured here
//     (BenchmarkCommitToPublish is).
//   - raw: the same number of messages, with the same subjects, payloads
//     and headers but IDs of their own, published by as many goroutines as
//     the relay has workers, each publishing batch messages asynchronously
//     and awaiting all their acknowledgements before its next batch, which
//     is what the relay's Publisher does with one Publish call. So batch=1
//     means one message at a time on either side, and workers=4 four
//     batches in flight on either side.
//
// Metrics, medians of the rounds: relay_msgs/s, raw_msgs/s and
// relay_%_of_raw (the median of the rounds' ratios).
func BenchmarkRelayVsRaw(b *testing.B) {
	for _, batch := range []int{1, 100, 1000} {
		for _, workers := range []int{1, 4} {
			b.Run("batch="+strconv.Itoa(batch)+"/workers="+strconv.Itoa(workers), func(b *testing.B) {
				s := newSetup(b)
				relayRound, rawRound := 0, 0 // message IDs of each round's own
				relay := func(n int) time.Duration {
					relayRound++
					msgs := benchMessages("relay-"+strconv.Itoa(relayRound)+"-", s.subject, n)
					for chunk := range slices.Chunk(msgs, 1000) {
						s.enqueue(b, true, chunk...)
					}
					pub := &countingPublisher{Publisher: jetstream.NewPublisher(s.js)}
					ctx, cancel := context.WithCancel(context.Background())
					r := s.o.Relay(pub, outbox.WithBatchSize(batch), outbox.WithWorkers(workers), outbox.WithListen(false))
					start := time.Now()
					done := make(chan struct{})
					go func() { defer close(done); _ = r.Run(ctx) }()
					for pub.n.Load() < int64(n) {
						time.Sleep(100 * time.Microsecond)
					}
					for s.pending(b) {
						time.Sleep(100 * time.Microsecond)
					}
					d := time.Since(start)
					cancel()
					<-done
					return d
				}
				raw := func(n int) time.Duration {
					rawRound++
					msgs := benchMessages("raw-"+strconv.Itoa(rawRound)+"-", s.subject, n)
					chunks := make(chan []outbox.Message, n/batch+1)
					for chunk := range slices.Chunk(msgs, batch) {
						chunks <- chunk
					}
					close(chunks)
					start := time.Now()
					var wg sync.WaitGroup
					for range workers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for chunk := range chunks {
								if err := rawPublish(s.js, chunk); err != nil {
									b.Error(err)
									return
								}
							}
						}()
					}
					wg.Wait()
					return time.Since(start)
				}
				res := benchratio.RunTimed(b, 4, relay, raw)
				b.ReportMetric(1e9/res.VariantNs, "relay_msgs/s")
				b.ReportMetric(1e9/res.AnchorNs, "raw_msgs/s")
				b.ReportMetric(100/res.Ratio, "relay_%_of_raw")
			})
		}
	}
}

// pending reports whether the outbox has a pending row.
func (s *setup) pending(tb testing.TB) bool {
	tb.Helper()
	var p bool
	if err := s.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM `+s.o.Table()+` WHERE state = 0)`).Scan(&p); err != nil {
		tb.Fatal(err)
	}
	return p
}

// rawPublish publishes msgs as the Publisher does, without the outbox:
// asynchronously, then every acknowledgement awaited.
func rawPublish(js natsjs.JetStream, msgs []outbox.Message) error {
	futures := make([]natsjs.PubAckFuture, 0, len(msgs))
	for _, m := range msgs {
		nm := nats.NewMsg(m.Topic)
		nm.Data = m.Payload
		nm.Header.Set(jetstream.KeyHeader, m.Key)
		f, err := js.PublishMsgAsync(nm, natsjs.WithMsgID(m.ID))
		if err != nil {
			return err
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return err
		}
	}
	return nil
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

// BenchmarkConsumePrefetch compares, in one run, Consume's throughput with
// WithPrefetch(prefetch) against WithPrefetch(499), the buffer of
// nats.go's default pull of 500 messages, with a handler that does
// nothing (each message still an Inbox.Process transaction). It alternates
// rounds of each (benchratio.RunTimed, 4 rounds of b.N/4 messages; run it
// with -benchtime=4000x): each round publishes its messages (not timed) on
// a subject of its own, then times a Consume, on a consumer of the round's
// own, from its start until every message is handled.
//
// Metrics, medians of the rounds: msgs/s, default_msgs/s and
// %_of_default (the median of the rounds' ratios).
func BenchmarkConsumePrefetch(b *testing.B) {
	for _, prefetch := range []int{0, 1, 10} {
		b.Run("prefetch="+strconv.Itoa(prefetch), func(b *testing.B) {
			s := newSetup(b)
			round := 0
			consume := func(prefetch int) func(n int) time.Duration {
				return func(n int) time.Duration {
					round++
					subject := s.subject + "r" + strconv.Itoa(round) + "."
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					for chunk := range slices.Chunk(benchMessages("r"+strconv.Itoa(round)+"-", subject, n), 1000) {
						if err := jetstream.NewPublisher(s.js).Publish(ctx, chunk); err != nil {
							b.Fatal(err)
						}
					}
					cons, err := s.stream.CreateOrUpdateConsumer(ctx, natsjs.ConsumerConfig{
						Durable: "r" + strconv.Itoa(round), AckPolicy: natsjs.AckExplicitPolicy, FilterSubject: subject + ">",
					})
					if err != nil {
						b.Fatal(err)
					}
					var handled atomic.Int64
					all := make(chan struct{})
					start := time.Now()
					done := make(chan struct{})
					go func() {
						defer close(done)
						_ = jetstream.Consume(ctx, cons, s.in, func(context.Context, pgx.Tx, outbox.Message) error {
							if handled.Add(1) == int64(n) {
								close(all)
							}
							return nil
						}, jetstream.WithPrefetch(prefetch))
					}()
					<-all
					d := time.Since(start)
					cancel()
					<-done
					return d
				}
			}
			res := benchratio.RunTimed(b, 4, consume(prefetch), consume(natsjs.DefaultMaxMessages-1))
			b.ReportMetric(1e9/res.VariantNs, "msgs/s")
			b.ReportMetric(1e9/res.AnchorNs, "default_msgs/s")
			b.ReportMetric(100/res.Ratio, "%_of_default")
		})
	}
}

package jetstream

import (
	"log/slog"
	"sync"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// defaultAckWait is the AckWait nats-server gives a consumer configured
// without one.
const defaultAckWait = 30 * time.Second

// progressInterval is how often Consume tells JetStream that a message's
// handler still runs: a third of shortestAckWait, so that one signal may
// be late or lost without the message being redelivered.
func progressInterval(cfg natsjs.ConsumerConfig) time.Duration {
	return shortestAckWait(cfg) / 3
}

// shortestAckWait is the shortest time the consumer waits for an
// acknowledgement: its AckWait, or a step of its BackOff, which replaces
// AckWait for redeliveries.
func shortestAckWait(cfg natsjs.ConsumerConfig) time.Duration {
	d := cfg.AckWait
	if d <= 0 {
		d = defaultAckWait
	}
	for _, b := range cfg.BackOff {
		if b > 0 && b < d {
			d = b
		}
	}
	return d
}

// keepInProgress sends m's working acknowledgement (InProgress, which
// restarts its AckWait) every interval until the returned function is
// called (more than once if need be), which returns once no more will be
// sent: call it before settling m, so that no working acknowledgement
// follows the settling one (after a NakWithDelay it would make the delay
// AckWait). A handler quicker than every costs a timer, not a goroutine.
func keepInProgress(m natsjs.Msg, every time.Duration, logger *slog.Logger) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		timer   *time.Timer
	)
	mu.Lock() // the first tick sees timer set
	defer mu.Unlock()
	timer = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if err := m.InProgress(); err != nil {
			// The connection is down: the message may be redelivered
			// meanwhile, and the inbox makes the later run a duplicate.
			logger.Warn("outbox/jetstream: in progress", "subject", m.Subject(), "err", err)
		}
		timer.Reset(every)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}

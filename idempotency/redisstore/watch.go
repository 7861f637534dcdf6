package redisstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/watchset"
)

var _ idempotency.Watcher = (*Store)(nil)

// Timing of the subscription.
const (
	// listenIdle is how long the subscriber waits for a message before it
	// checks whether anybody still waits, and stops if nobody does.
	listenIdle = 10 * time.Second
	// listenReadyWait bounds how long a first Watch waits for the
	// subscription to be confirmed, so that no message sent meanwhile is
	// missed.
	listenReadyWait = 2 * time.Second
	// listenRetryMax bounds the pause after a failed receive.
	listenRetryMax = 5 * time.Second
)

// watcher is the Store's idempotency.Watcher: a request waiting for an
// entry marks its hash (field w), the complete and release scripts then
// PUBLISH the entry's name on the prefix's settled channel, and one
// subscription of the Store's own (open while somebody waits) turns the
// messages into wake-ups.
type watcher struct {
	store *Store
	set   watchset.Set[string]

	mu     sync.Mutex
	ready  chan struct{} // closed once the current subscription is confirmed
	broken bool          // the subscriber's last receive failed
}

// channel is the settled channel of the store's prefix.
func (w *watcher) channel() string { return w.store.cfg.prefix + "settled" }

// Watch implements idempotency.Watcher. The first waiter of a key on this
// Store marks the entry, so that completions of entries nobody waits for
// publish nothing, and starts the subscription if none is open.
func (s *Store) Watch(ctx context.Context, k idempotency.Key) (<-chan struct{}, func(), error) {
	name := s.redisKey(k)
	ch, stop, first, listen := s.watch.set.Add(name)
	ready, broken := s.watch.listening(listen)
	if first {
		if err := s.gate.Enter(ctx); err != nil {
			stop()
			return nil, nil, wrap(ctx, "watch", err)
		}
		err := watchScript.Run(ctx, s.rdb, []string{name}).Err()
		s.gate.Leave()
		if err != nil {
			stop()
			return nil, nil, wrap(ctx, "watch", err)
		}
	}
	if broken {
		return ch, stop, nil // the fallback poll covers what is missed
	}
	t := time.NewTimer(listenReadyWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C: // not subscribed yet: the fallback poll covers the gap
	case <-ctx.Done():
		stop()
		return nil, nil, wrap(ctx, "watch", ctx.Err())
	}
	return ch, stop, nil
}

// listening returns the channel closed once the subscription is confirmed,
// and whether the subscriber's last receive failed; it starts a subscriber
// first when start is true.
func (w *watcher) listening(start bool) (ready <-chan struct{}, broken bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if start {
		w.ready, w.broken = make(chan struct{}), false
		go w.listen(w.ready)
	}
	return w.ready, w.broken
}

func (w *watcher) setBroken(broken bool) {
	w.mu.Lock()
	w.broken = broken
	w.mu.Unlock()
}

// listen holds the subscription until nobody waits. go-redis resubscribes
// after a lost connection; every (re)subscription wakes every waiter, since
// messages published meanwhile are lost.
func (w *watcher) listen(ready chan struct{}) {
	ctx := context.Background()
	ps := w.store.rdb.Subscribe(ctx, w.channel())
	defer ps.Close()
	var readyOnce sync.Once
	pause := 100 * time.Millisecond
	for {
		msg, err := ps.ReceiveTimeout(ctx, listenIdle)
		switch m := msg.(type) {
		case *redis.Subscription:
			readyOnce.Do(func() { close(ready) })
			w.setBroken(false)
			w.set.FireAll()
			continue
		case *redis.Message:
			w.set.Fire(m.Payload)
			continue
		}
		if err == nil {
			continue // a pong
		}
		if isTimeout(err) {
			if w.set.Retire() {
				return
			}
			continue
		}
		w.setBroken(true)
		if w.set.Retire() {
			return
		}
		t := time.NewTimer(pause)
		<-t.C
		pause = min(2*pause, listenRetryMax)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

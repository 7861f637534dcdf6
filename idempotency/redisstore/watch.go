package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/watchset"
)

var _ idempotency.Watcher = (*Store)(nil)

// watcher is the Store's idempotency.Watcher: a request waiting for an
// entry marks it (entry.go: the waiters' mark), the complete and release scripts then
// PUBLISH the entry's name on the prefix's settled channel, and one
// subscription of the Store's own (open while somebody waits) turns the
// messages into wake-ups.
type watcher struct {
	store *Store
	set   watchset.Set[string]
	// idle is how long listen waits for a message before it asks whether
	// anybody still waits and checks the connection, and pingWait how long
	// that check waits for its answer: watchset.Idle and
	// watchset.PingWait, shorter in tests.
	idle, pingWait time.Duration
	// settled is channel's name, made once (New) for the complete and
	// release scripts' arguments: made anew, it cost each call an
	// allocation.
	settled string
}

// channel is the settled channel of the store's prefix.
func (w *watcher) channel() string { return w.store.cfg.prefix + "settled" }

// Watch implements idempotency.Watcher. The first waiter of a key on this
// Store marks the entry, so that completions of entries nobody waits for
// publish nothing, and starts the subscription if none is open. An entry
// that is not in progress when it would be marked (settled, released or
// absent) wakes its waiters at once: the next claim of the key makes an
// entry without the mark, whose completion would publish nothing, so they
// must look again, and watch again if they find it in progress.
func (s *Store) Watch(ctx context.Context, k idempotency.Key) (<-chan struct{}, func(), error) {
	name := s.redisKey(k)
	mark := func(ctx context.Context) error {
		g := s.gates.forKey(ctx, name)
		if err := g.Enter(ctx); err != nil {
			return err
		}
		defer g.Leave()
		marked, err := s.run(ctx, watchScript, name, nil)
		if err == nil && marked == int64(0) {
			s.watch.set.Fire(name)
		}
		return err
	}
	ch, stop, err := s.watch.set.Watch(ctx, name, mark, s.watch.listen)
	if err != nil {
		return nil, nil, wrap(ctx, "watch", err)
	}
	return ch, stop, nil
}

// listen holds the subscription until nobody waits. go-redis resubscribes
// after a lost connection; every (re)subscription wakes every waiter, since
// messages published meanwhile are lost. After idle without a message
// while somebody waits, it sends a PING on the subscription, and
// subscribes on a new connection when no answer comes within pingWait (see
// watchset.PingWait): go-redis keeps a connection whose reads only time
// out, and one that died silently would otherwise keep the waiters from
// every message, leaving them to their fallback poll for as long as
// anybody waits.
func (w *watcher) listen() {
	ctx := context.Background()
	ps := w.store.rdb.Subscribe(ctx, w.channel())
	defer func() { ps.Close() }()
	pause := 100 * time.Millisecond
	pinged := false // a PING is unanswered
	for {
		wait := w.idle
		if pinged {
			wait = w.pingWait
		}
		msg, err := ps.ReceiveTimeout(ctx, wait)
		if err == nil {
			pinged = false // any message shows the connection alive
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			w.set.Listening()
			pause = 100 * time.Millisecond
			continue
		case *redis.Message:
			w.set.Fire(m.Payload)
			continue
		}
		if err == nil {
			continue // a pong
		}
		if isTimeout(err) {
			if !pinged {
				if w.set.Retire() {
					return
				}
				if err = ps.Ping(ctx); err == nil {
					pinged = true
					continue
				}
			} else {
				err = fmt.Errorf("the subscription did not answer a PING within %v", w.pingWait)
				ps.Close()
				ps = w.store.rdb.Subscribe(ctx, w.channel())
				pinged = false
			}
		}
		w.store.reload.failed(err) // the subscribed node may be gone
		w.set.Failed()
		if w.set.Retire() {
			return
		}
		t := time.NewTimer(pause)
		<-t.C
		pause = min(2*pause, watchset.RetryMax)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Package watchset keeps the requests of one process that wait for store
// entries to settle, and wakes them: the local half of a store's
// idempotency.Watcher. The store's remote half (a Redis subscription, a
// PostgreSQL LISTEN connection) calls Fire with the key of each settlement
// it hears of; Set tells it when to start listening and when it may stop.
package watchset

import (
	"context"
	"sync"
	"time"
)

// Timing of the listeners.
const (
	// ReadyWait bounds how long Watch waits for a new listener to listen,
	// so that no settlement announced meanwhile is missed; past it the
	// waiter relies on its fallback poll.
	ReadyWait = 2 * time.Second
	// Idle is how long a listener waits for an announcement before it asks
	// Retire whether anybody still waits, and, while somebody does, checks
	// that its connection still answers (see PingWait).
	Idle = 10 * time.Second
	// PingWait bounds how long a listener waits for the answer to that
	// check before it takes its connection for dead and listens on a new
	// one. A connection whose network drops its packets silently (a NAT
	// or firewall that forgot it, a partitioned host) delivers no
	// announcement and reports no error, and TCP keepalive, where it is
	// on, takes minutes to notice, or never does behind a proxy that
	// answers it. So a dead connection is replaced within Idle+PingWait;
	// its waiters rely on their fallback poll meanwhile.
	PingWait = 2 * time.Second
	// RetryMax bounds a listener's pause between two attempts to listen.
	RetryMax = 5 * time.Second
)

// Set holds the waiters of keys of type K. The zero Set is empty and ready
// to use. It is safe for concurrent use.
type Set[K comparable] struct {
	mu        sync.Mutex
	m         map[K]*watch
	listening bool          // a listener runs
	ready     chan struct{} // closed once it listens
	broken    bool          // its last attempt to listen failed
}

// watch is the channel shared by every waiter of one key, closed by Fire.
type watch struct {
	ch chan struct{}
	n  int
}

// Add registers a waiter for k. settled is closed by the next Fire(k) or
// FireAll; stop removes the waiter and must be called once it no longer
// waits. first reports that k had no waiter before (the store may need to
// ask its server to announce k), and listen that no listener is running:
// the caller must start one, which calls Retire when it wants to stop.
func (s *Set[K]) Add(k K) (settled <-chan struct{}, stop func(), first, listen bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.add(k)
}

// add is Add with the lock held. A caller told to start a listener finds a
// fresh ready channel in s.ready, made under the same lock, so that a
// concurrent Watch never reads the last listener's (or none).
func (s *Set[K]) add(k K) (settled <-chan struct{}, stop func(), first, listen bool) {
	if s.m == nil {
		s.m = make(map[K]*watch)
	}
	w, ok := s.m[k]
	if !ok {
		w = &watch{ch: make(chan struct{})}
		s.m[k] = w
	}
	w.n++
	listen = !s.listening
	if listen {
		s.listening = true
		s.ready, s.broken = make(chan struct{}), false
	}
	var once sync.Once
	stop = func() { once.Do(func() { s.remove(k, w) }) }
	return w.ch, stop, !ok, listen
}

func (s *Set[K]) remove(k K, w *watch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.n--
	if w.n == 0 && s.m[k] == w {
		delete(s.m, k)
	}
}

// Fire wakes every waiter of k. Waiters that Add registers afterwards wait
// for the next Fire.
func (s *Set[K]) Fire(k K) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.m[k]; ok {
		close(w.ch)
		delete(s.m, k)
	}
}

// FireAll wakes every waiter, for a listener that may have missed
// settlements (its connection was down).
func (s *Set[K]) FireAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, w := range s.m {
		close(w.ch)
		delete(s.m, k)
	}
}

// Len returns the number of keys with waiters.
func (s *Set[K]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// Retire is called by the listener when it would like to stop: it reports
// true, and the listener must stop, when nobody waits; the next Add then
// asks for a new listener. It reports false while somebody waits.
func (s *Set[K]) Retire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) > 0 {
		return false
	}
	s.listening = false
	return true
}

// Watch registers a waiter for k for a store with a remote half, and
// returns its channel and stop function (see Add). When no listener runs it
// starts listen in a goroutine of its own; listen calls Listening once it
// listens, Failed when it cannot, Fire for each settlement it hears of, and
// returns when Retire says nobody waits. When k had no waiter, announce asks
// the server to announce k's settlement (an error stops the watch and is
// returned, and wakes the waiters of k that joined meanwhile, since
// nothing announces k for them). Watch then waits, up to ReadyWait or
// until ctx ends, until the listener listens or fails to; it does not wait
// when its last attempt failed.
func (s *Set[K]) Watch(ctx context.Context, k K, announce func(context.Context) error, listen func()) (<-chan struct{}, func(), error) {
	s.mu.Lock()
	ch, stop, first, start := s.add(k)
	ready, broken := s.ready, s.broken
	s.mu.Unlock()
	if start {
		go listen()
	}
	if first && announce != nil {
		if err := announce(ctx); err != nil {
			stop()
			// The waiters of k that joined while announce ran did not
			// announce k themselves: wake them, to look again and watch
			// anew, one of them announcing k, rather than leave them
			// waiting for a settlement nothing will announce.
			s.Fire(k)
			return nil, nil, err
		}
	}
	if broken {
		return ch, stop, nil
	}
	t := time.NewTimer(ReadyWait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C: // not listening yet: the fallback poll covers the gap
	case <-ctx.Done():
		stop()
		return nil, nil, ctx.Err()
	}
	return ch, stop, nil
}

// Listening is called by the listener each time it (re)starts listening:
// waiters stop waiting for it. On a restart, or a start after Failed,
// every waiter is woken, since settlements announced while it was not
// listening are lost (before a first start that nothing failed there is
// nothing to miss: Watch waited for it).
func (s *Set[K]) Listening() {
	s.mu.Lock()
	s.broken = false
	restart := !s.closeReady()
	s.mu.Unlock()
	if restart {
		s.FireAll()
	}
}

// Failed is called by the listener when it could not listen: waiters do
// not wait for it (their fallback poll covers the gap), neither new ones
// nor those already waiting in Watch, which would otherwise wait out
// ReadyWait, longer than that poll's interval, for a listener that may
// never listen (a LISTEN refused behind a pooler fails on every attempt).
// Its ready channel is closed, so the Listening of a later attempt wakes
// every waiter: those let go here may have missed settlements meanwhile.
func (s *Set[K]) Failed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broken = true
	s.closeReady()
}

// Closed is called by the store once no listener will listen any more
// (the store was closed, and the listener ended or never began): every
// waiter is woken, to poll from then on, and a Watch that waits for the
// listener to listen stops waiting, since it would wait out ReadyWait for
// nothing.
func (s *Set[K]) Closed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broken = true
	// The waiters first, under the same lock, so that a Watch let go
	// below returns a channel that is already closed.
	for k, w := range s.m {
		close(w.ch)
		delete(s.m, k)
	}
	s.closeReady()
}

// closeReady closes the ready channel of the current listener, if there is
// one and it is open, and reports whether it closed it. The caller holds
// s.mu.
func (s *Set[K]) closeReady() bool {
	if s.ready == nil {
		return false
	}
	select {
	case <-s.ready:
		return false
	default:
		close(s.ready)
		return true
	}
}

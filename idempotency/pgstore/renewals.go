package pgstore

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/watchset"
)

// DefaultRenewalConns is how many connections of its own a Store keeps for
// lease renewals when WithRenewalConns is not given.
const DefaultRenewalConns = 2

// renewals is the Store's own small pool for Renew: outside the pool given
// to New, so that renewals never wait behind requests (or the handlers'
// own queries) for a connection, and configured so that a renewal is one
// round trip: its connections are opened ahead, in the background, at the
// Store's first renewal, kept open, and never pinged before use (pgxpool
// pings a connection idle over a second by default; a broken connection
// makes one renewal fail, and the next runs on a fresh connection, see
// connBroken). Until one of them is open, renewals use the main pool.
type renewals struct {
	mu     sync.Mutex
	pool   *pgxpool.Pool
	warm   bool // a connection of pool was open once: renewals use it from then on
	closed bool
	socks  sockets // pool's network connections, for Close to cut
}

// renewalPool returns the pool a renewal should use: the renewal pool,
// created on first use, once it has a connection open; the main pool until
// then, and when WithRenewalConns(0) asked for none or the Store is closed.
// Once a connection was open, renewals stay on the renewal pool, which
// opens more connections (up to the main pool's MaxConns) when its kept
// ones are busy.
func (s *Store) renewalPool() *pgxpool.Pool {
	if s.cfg.renewalConns <= 0 {
		return s.pool
	}
	r := &s.renew
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return s.pool
	}
	if r.pool == nil {
		cfg := s.pool.Config()
		// It keeps renewalConns connections open and may grow to the main
		// pool's size: under store latency each claim has a renewal in
		// flight most of the time, and one that waits for a connection
		// takes two round trips.
		cfg.MaxConns = int32(max(s.cfg.renewalConns, int(cfg.MaxConns)))
		cfg.MinConns = int32(s.cfg.renewalConns)
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
		dial := cfg.ConnConfig.DialFunc
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			// A dial that has not connected yet (a host that drops SYNs)
			// is cut too: pgxpool's Close waits for it.
			ctx, stop := r.socks.dialing(ctx)
			defer stop()
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return r.socks.track(c)
		}
		p, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			return s.pool // a configuration the main pool accepted: not expected
		}
		r.pool = p
	}
	if !r.warm {
		if st := r.pool.Stat(); st.IdleConns()+st.AcquiredConns() == 0 {
			return s.pool // still opening its first connection
		}
		r.warm = true
	}
	// Once warm, always: with its kept connections busy, a renewal opens
	// another (one round trip more, and none queued behind requests).
	return r.pool
}

// renewalsClosed reports whether Close closed the renewal pool: a renewal
// that failed on it may have found it closed.
func (s *Store) renewalsClosed() bool {
	r := &s.renew
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// connBroken reports whether a renewal's error shows its connection
// broken rather than a statement failing or the renewal timing out: the
// server ended the session (a FATAL error: a restart, a failover,
// pg_terminate_backend) or the network failed. Renew then closes every
// connection of the renewal pool (pgxpool.Pool.Reset; those in use when
// they come back), since they were opened to the same server and most
// likely broke with it: never pinged, each would otherwise fail one
// renewal in turn, and with more of them than the retries that fit in a
// lease, a claim whose store answers again at once would be counted lost.
// A timeout is left alone: pgx closes that connection itself, and a slow
// server is not made to accept a round of new connections. So is a
// failure to open a connection (the kept ones busy): it says nothing of
// the open ones, and a server at max_connections, which refuses it with a
// FATAL error, would give their places away to other clients; a server
// gone breaks them too, and the first renewal on one resets then.
func connBroken(err error) bool {
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return false
	}
	if pgErr := pgError(err); pgErr != nil {
		sev := pgErr.SeverityUnlocalized // Severity is in lc_messages' language
		if sev == "" {
			sev = pgErr.Severity
		}
		return sev == "FATAL" || sev == "PANIC"
	}
	return !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !pgconn.Timeout(err)
}

// Close closes the connections the Store opened itself: those it keeps for
// renewals (see WithRenewalConns) and the LISTEN connection of waiting
// requests (see Watch), whose goroutine has returned when Close does. It
// does not close the pool given to New. Call it when done with the Store,
// after Drain and before closing that pool. It waits up to 2 s for a
// database that does not answer, then cuts those connections. The Store stays usable; later
// renewals use the main pool (so do those in flight that found the
// renewal pool closed), and the requests waiting meanwhile are woken and
// poll (Watch returns an error from then on). Close is safe to call more
// than once and returns nil.
func (s *Store) Close() error {
	s.watch.close()
	r := &s.renew
	r.mu.Lock()
	p := r.pool
	r.pool, r.closed = nil, true
	r.mu.Unlock()
	if p != nil {
		closePool(p, &r.socks)
	}
	return nil
}

// closeWait bounds how long Close waits for the renewal pool to close
// before it cuts its connections: as long as the LISTEN connection's
// check waits for an answer (watchset.PingWait).
const closeWait = watchset.PingWait

// closePool closes p, whose network connections socks holds. pgxpool's
// Close waits for the connections it is opening (up to a minute, against
// a database that accepts connections and does not answer), for those in
// use, and for each broken one's Terminate (up to 15 s): past closeWait,
// the database is taken for gone and every connection is cut, with the
// dials that have not connected yet (a host that drops SYNs), which ends
// those waits at once, so that a process shutting down while its
// database stalls is not held past its orchestrator's grace period.
func closePool(p *pgxpool.Pool, socks *sockets) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Close()
	}()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		socks.cut()
		<-done
	}
}

// sockets are the network connections of a pool, kept so that they can be
// cut without the pool (see closePool). It is safe for concurrent use.
type sockets struct {
	mu     sync.Mutex
	open   map[*socket]struct{}
	closed bool // cut: connections dialled from then on are closed at once
	cutCtx context.Context
	cutAll context.CancelFunc // ends cutCtx, and the dials in progress
}

// dialing returns ctx, ended also by cut, for a dial.
func (ss *sockets) dialing(ctx context.Context) (context.Context, context.CancelFunc) {
	ss.mu.Lock()
	if ss.cutCtx == nil {
		ss.cutCtx, ss.cutAll = context.WithCancel(context.Background())
	}
	cutCtx := ss.cutCtx
	ss.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(cutCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// socket is a connection of sockets, which its Close forgets.
type socket struct {
	net.Conn
	s *sockets
}

// track keeps c, or closes it when the sockets were cut.
func (ss *sockets) track(c net.Conn) (net.Conn, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	if ss.open == nil {
		ss.open = make(map[*socket]struct{})
	}
	k := &socket{Conn: c, s: ss}
	ss.open[k] = struct{}{}
	return k, nil
}

func (k *socket) Close() error {
	k.s.mu.Lock()
	delete(k.s.open, k)
	k.s.mu.Unlock()
	return k.Conn.Close()
}

// cut closes every connection, ends the dials in progress, and closes
// the connections dialled from then on.
func (ss *sockets) cut() {
	ss.mu.Lock()
	ss.closed = true
	open := ss.open
	ss.open = nil
	if ss.cutAll != nil {
		ss.cutAll()
	}
	ss.mu.Unlock()
	for k := range open {
		_ = k.Conn.Close()
	}
}

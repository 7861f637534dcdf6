package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/pgtext"
	"github.com/saferetry/saferetry/internal/watchset"
)

var _ idempotency.Watcher = (*Store)(nil)

// watcher is the Store's idempotency.Watcher: requests waiting for an entry
// mark its row watched, and the complete and release statements then send
// a NOTIFY, which a LISTEN connection of the Store's own (outside the pool,
// opened while somebody waits) hears and turns into wake-ups.
type watcher struct {
	store *Store
	set   watchset.Set[string]

	nameOnce sync.Once
	name     string

	// mu guards closed and cancel, and the start of a listener
	// (running.Add), so that close, which sets closed and then waits for
	// running, never misses a listener that starts meanwhile.
	mu      sync.Mutex
	closed  bool
	cancel  context.CancelFunc // ends the last listener started
	running sync.WaitGroup

	// idle is how long receive waits for a notification before it asks
	// whether anybody still waits and checks the connection, and pingWait
	// how long that check waits for its answer: watchset.Idle and
	// watchset.PingWait, shorter in tests.
	idle, pingWait time.Duration

	// tx is set for a TxStore's Store, whose claims in progress are
	// uncommitted rows that Watch cannot mark: finding no row to mark is
	// then the usual case, not a sign that the key is free.
	tx bool
}

// errWatchClosed is what Watch returns once the Store is closed: it has no
// LISTEN connection any more, so waiting requests poll.
var errWatchClosed = errors.New("the Store is closed, so waiting requests poll")

// close ends the LISTEN connection, if one is open, and waits until its
// goroutine returned; the requests still waiting are woken, to look at
// their entries again and then poll. Later Watches return errWatchClosed.
// Every call waits, a second one too: one that returned at once while the
// first still ended the listener would break Close's promise.
func (w *watcher) close() {
	w.mu.Lock()
	w.closed = true
	cancel := w.cancel
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	w.running.Wait()
	w.set.Closed()
}

// channel returns the notification channel of the store's table.
func (w *watcher) channel() string {
	w.nameOnce.Do(func() {
		sum := sha256.Sum256([]byte(w.store.names.table))
		w.name = "saferetry_" + hex.EncodeToString(sum[:10])
	})
	return w.name
}

// payload names the entry (scope, key), as kept in the table, in a
// notification: 128 bits of a hash, short and free of any byte that a
// notification could not carry. A collision only wakes a waiter for
// nothing.
func (w *watcher) payload(scope, key string) string {
	// Hashed in one call over a buffer on the stack for the usual short
	// scope and key (Complete computes it on every call): no digest, sum
	// or hex buffer to allocate, only the string.
	var buf [128]byte
	b := binary.AppendUvarint(buf[:0], uint64(len(scope)))
	b = append(append(b, scope...), key...)
	sum := sha256.Sum256(b)
	var out [32]byte
	hex.Encode(out[:], sum[:16])
	return string(out[:])
}

// Watch implements idempotency.Watcher. The first waiter of a key on this
// Store marks the entry's row, so that its completion or release sends a
// notification (completions of unwatched rows send none, which keeps NOTIFY
// and its commit-time lock off the usual path), and starts the LISTEN
// connection if none is open. An entry that is not in progress when it
// would be marked (settled, released or absent) wakes its waiters at once:
// the next claim of the key makes a row without the mark, whose completion
// would notify nobody, so they must look again, and watch again if they
// find it in progress. After Close it returns an error: the Middleware
// then polls. In transactional mode (NewTx) a claim in progress is an
// uncommitted row, which Watch cannot mark, so no notification comes for
// it: the waiter's next claim waits for the holder's transaction itself.
func (s *Store) Watch(ctx context.Context, k idempotency.Key) (<-chan struct{}, func(), error) {
	s.watch.mu.Lock()
	closed := s.watch.closed
	s.watch.mu.Unlock()
	if closed {
		return nil, nil, fmt.Errorf("pgstore: watch: %w", errWatchClosed)
	}
	scope, key := pgtext.Encode(k.Scope), pgtext.Encode(k.Key)
	payload := s.watch.payload(scope, key)
	mark := func(ctx context.Context) error {
		if err := s.gate.Enter(ctx); err != nil {
			return err
		}
		defer s.gate.Leave()
		if err := s.checkPool(ctx); err != nil {
			return err
		}
		var marked bool
		if err := s.pool.QueryRow(ctx, s.sql.watch, scope, key).Scan(&marked); err != nil {
			return err
		}
		if !marked && !s.watch.tx {
			s.watch.set.Fire(payload)
		}
		return nil
	}
	ch, stop, err := s.watch.set.Watch(ctx, payload, mark, s.watch.listen)
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: watch: %w", err)
	}
	return ch, stop, nil
}

// listen holds a LISTEN connection until nobody waits or the Store is
// closed, reconnecting after failures, a connection that stopped
// answering among them (see receive).
func (w *watcher) listen() {
	w.mu.Lock()
	if w.closed {
		// Close came between the Watch that started it and now: wake
		// its waiter, which close may have missed, and let go its Watch,
		// which waits for this listener to listen.
		w.mu.Unlock()
		w.set.Closed()
		return
	}
	// ctx ends when the Store is closed, cutting short a connection
	// attempt, a wait for a notification or a pause.
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.running.Add(1)
	w.mu.Unlock()
	defer w.running.Done()
	defer cancel()
	pause := 100 * time.Millisecond
	for {
		conn, err := w.connect(ctx)
		if err == nil {
			w.set.Listening()
			pause = 100 * time.Millisecond
			err = w.receive(ctx, conn)
			// Bounded: a dead connection may not take the Terminate.
			cctx, cancel := context.WithTimeout(context.Background(), w.pingWait)
			_ = conn.Close(cctx)
			cancel()
			// A ping or read that timed out has pgx end the connection in
			// a goroutine of its own, which waits up to 15 s for the
			// server's answer to a Terminate that a dead connection never
			// brings, and conn.Close then returns at once: the socket is
			// closed here, so that it is gone when listen returns (Close
			// promises it) and replacements do not pile dead ones up.
			_ = conn.PgConn().Conn().Close()
			if err == nil {
				return // retired: nobody waits
			}
		}
		if ctx.Err() != nil {
			return // closed: close wakes the waiters
		}
		w.set.Failed()
		w.store.logger().LogAttrs(context.Background(), slog.LevelWarn, "pgstore: the LISTEN connection for waiting requests failed; they poll meanwhile",
			slog.String("channel", w.channel()), slog.Any("error", err))
		if w.set.Retire() {
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
		pause = min(2*pause, watchset.RetryMax)
	}
}

// connect opens a connection of the listener's own, outside the pool (a
// LISTEN holds its connection for as long as it listens), and listens.
func (w *watcher) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, watchset.RetryMax)
	defer cancel()
	cfg := w.store.cfg.listenConfig
	if cfg == nil {
		cfg = w.store.pool.Config().ConnConfig
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if w.store.cfg.listenConfig == nil && w.store.cfg.pooler != PoolerSession {
		announced, server, err := serverPIDs(ctx, conn)
		if err == nil && announced != server {
			err = fmt.Errorf("%w (the connection announced server process %d, the server is process %d): give WithListenConfig a direct connection", ErrListenBehindPooler, announced, server)
		}
		if err != nil {
			_ = conn.Close(context.Background())
			return nil, err
		}
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{w.channel()}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// receive hands notifications to the waiters until the connection fails
// or ctx ends (an error), or nobody waits any more (nil). After idle
// without a notification while somebody waits, it pings the server, and
// takes a connection that does not answer within pingWait for failed (see
// watchset.PingWait): one that died silently would otherwise keep the
// waiters from every notification, and only their fallback poll would
// tell them of settlements, for as long as anybody waits.
func (w *watcher) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		idle, cancel := context.WithTimeout(ctx, w.idle)
		n, err := conn.WaitForNotification(idle)
		cancel()
		switch {
		case err == nil:
			w.set.Fire(n.Payload)
		case ctx.Err() != nil:
			return ctx.Err()
		case pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded):
			if w.set.Retire() {
				return nil
			}
			pctx, cancel := context.WithTimeout(ctx, w.pingWait)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("the LISTEN connection did not answer a ping within %v: %w", w.pingWait, err)
			}
		default:
			return err
		}
	}
}

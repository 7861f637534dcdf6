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
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(scope)))])
	h.Write([]byte(scope))
	h.Write([]byte(key))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Watch implements idempotency.Watcher. The first waiter of a key on this
// Store marks the entry's row, so that its completion or release sends a
// notification (completions of unwatched rows send none, which keeps NOTIFY
// and its commit-time lock off the usual path), and starts the LISTEN
// connection if none is open.
func (s *Store) Watch(ctx context.Context, k idempotency.Key) (<-chan struct{}, func(), error) {
	scope, key := encodeText(k.Scope), encodeText(k.Key)
	mark := func(ctx context.Context) error {
		if err := s.gate.Enter(ctx); err != nil {
			return err
		}
		defer s.gate.Leave()
		if err := s.checkPool(ctx); err != nil {
			return err
		}
		_, err := s.pool.Exec(ctx, s.sql.watch, scope, key)
		return err
	}
	ch, stop, err := s.watch.set.Watch(ctx, s.watch.payload(scope, key), mark, s.watch.listen)
	if err != nil {
		return nil, nil, fmt.Errorf("pgstore: watch: %w", err)
	}
	return ch, stop, nil
}

// listen holds a LISTEN connection until nobody waits, reconnecting after
// failures.
func (w *watcher) listen() {
	pause := 100 * time.Millisecond
	for {
		conn, err := w.connect()
		if err == nil {
			w.set.Listening()
			pause = 100 * time.Millisecond
			err = w.receive(conn)
			_ = conn.Close(context.Background())
			if err == nil {
				return // retired: nobody waits
			}
		}
		w.set.Failed()
		w.store.logger().LogAttrs(context.Background(), slog.LevelWarn, "pgstore: the LISTEN connection for waiting requests failed; they poll meanwhile",
			slog.String("channel", w.channel()), slog.Any("error", err))
		if w.set.Retire() {
			return
		}
		t := time.NewTimer(pause)
		<-t.C
		pause = min(2*pause, watchset.RetryMax)
	}
}

// connect opens a connection of the listener's own, outside the pool (a
// LISTEN holds its connection for as long as it listens), and listens.
func (w *watcher) connect() (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), watchset.RetryMax)
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
// (an error) or nobody waits any more (nil).
func (w *watcher) receive(conn *pgx.Conn) error {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), watchset.Idle)
		n, err := conn.WaitForNotification(ctx)
		cancel()
		switch {
		case err == nil:
			w.set.Fire(n.Payload)
		case pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded):
			if w.set.Retire() {
				return nil
			}
		default:
			return err
		}
	}
}

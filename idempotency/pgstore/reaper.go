package pgstore

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// DeleteExpired deletes up to batch expired rows in one statement that walks
// the expires_at index (never the whole table) and skips rows locked by a
// concurrent claim. It returns how many rows it deleted; fewer than batch
// means no more expired rows were found. Batch must be positive. Expired rows
// already count as absent, so cleanup only reclaims space.
func (s *Store) DeleteExpired(ctx context.Context, batch int) (int64, error) {
	if batch <= 0 {
		return 0, fmt.Errorf("pgstore: delete expired: batch must be positive, got %d", batch)
	}
	if err := s.checkPool(ctx); err != nil {
		return 0, fmt.Errorf("pgstore: delete expired: %w", err)
	}
	tag, err := s.pool.Exec(ctx, s.sql.deleteExpired, batch)
	if err != nil {
		return 0, fmt.Errorf("pgstore: delete expired: %w", err)
	}
	return tag.RowsAffected(), nil
}

// StartReaper starts a goroutine that, every interval, calls DeleteExpired
// with the WithReapBatch size until a batch comes back short. Failures are
// logged to the WithLogger logger and retried at the next tick. The goroutine
// ends when ctx is done (cutting short a statement in flight) or when the
// returned stop function is called; stop lets a statement in flight finish,
// so no delete of the reaper's runs after stop returns, unless the
// database does not answer it within 2 s: stop then cuts it short, as the
// end of ctx does, and returns (the delete may still run on the server,
// which changes nothing that a reader sees: expired rows count as absent).
// stop may be called more than once. StartReaper panics if interval is not
// positive. Several instances may run reapers on one table: they skip each
// other's locked rows.
func (s *Store) StartReaper(ctx context.Context, interval time.Duration) (stop func()) {
	if interval <= 0 {
		panic("pgstore: StartReaper: interval must be positive")
	}
	// rctx is ctx, which stop also ends once the database kept it waiting
	// closeWait.
	rctx, cut := context.WithCancel(ctx)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cut()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-quit:
				return
			case <-t.C:
				s.reapOnce(rctx, quit)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		t := time.NewTimer(closeWait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			cut() // the database does not answer
			<-done
		}
	}
}

// reapOnce deletes expired rows batch by batch until a batch comes back
// short, ctx is done or quit is closed.
func (s *Store) reapOnce(ctx context.Context, quit <-chan struct{}) {
	batch := s.cfg.reapBatch
	for {
		select {
		case <-quit:
			return
		default:
		}
		n, err := s.DeleteExpired(ctx, batch)
		if err != nil {
			if s.cfg.logger != nil && ctx.Err() == nil {
				s.cfg.logger.WarnContext(ctx, "pgstore: reaper failed", "table", s.cfg.table, "err", err)
			}
			return
		}
		if n < int64(batch) {
			return
		}
	}
}

package memstore

import (
	"context"
	"sync"

	"github.com/saferetry/saferetry/idempotency"
)

var _ idempotency.Watcher = (*Store)(nil)

// Watch implements idempotency.Watcher: Complete and Release of k wake the
// watchers at once. A claim whose lease lapses wakes nobody (the waiting
// request finds the lapse by polling). It never fails, but for ctx's own
// error.
func (s *Store) Watch(ctx context.Context, k idempotency.Key) (<-chan struct{}, func(), error) {
	if err := ctxErr(ctx); err != nil {
		return nil, nil, err
	}
	s.watching.Add(1)
	ch, stop, _, _ := s.watchers.Add(k)
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			stop()
			s.watching.Add(-1)
		})
	}, nil
}

// settled wakes the watchers of k, if the store has any watcher at all (a
// settlement nobody waits for costs one atomic load).
func (s *Store) settled(k idempotency.Key) {
	if s.watching.Load() > 0 {
		s.watchers.Fire(k)
	}
}

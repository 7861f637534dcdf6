package idempotency_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

// heldOnceStore finds each key held by the same request on its first
// Claim; later Claims are memstore's own (the key is then free), or, with
// completed, find it completed (201). Its Watch's stop panics, as a store
// with a bug might.
type heldOnceStore struct {
	*memstore.Store
	completed bool
	mu        sync.Mutex
	claims    map[idempotency.Key]int
}

func (s *heldOnceStore) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	s.mu.Lock()
	s.claims[k]++
	n := s.claims[k]
	s.mu.Unlock()
	e := idempotency.Entry{State: idempotency.StateInProgress, Fingerprint: fp, Token: 1, LeaseRemaining: lease}
	switch {
	case n == 1:
		return idempotency.ClaimResult{Entry: e}, nil
	case s.completed:
		e.State, e.Response = idempotency.StateCompleted, &idempotency.Response{Status: http.StatusCreated}
		return idempotency.ClaimResult{Entry: e}, nil
	}
	return s.Store.Claim(ctx, k, fp, lease, ttl)
}

func (s *heldOnceStore) Watch(ctx context.Context, k idempotency.Key) (<-chan struct{}, func(), error) {
	settled, stop, err := s.Store.Watch(ctx, k)
	if err != nil {
		return nil, nil, err
	}
	return settled, func() { stop(); panic("stop bug") }, nil
}

// TestWatchStopPanicBeforeRunGivesOneEvent checks that a request that
// waited for its key and then acquired it gives its one event and settles
// its claim when its watch's stop (the store's) panics as the wait ends
// before the handler runs: the stop is cleanup, its panic dropped (and
// logged), and the handler runs under the claim. The panic used to go on
// from there, with no event given and the claim acquired never let go (a
// transaction left open, in transactional mode).
func TestWatchStopPanicBeforeRunGivesOneEvent(t *testing.T) {
	st := &heldOnceStore{Store: newStore(t), claims: map[idempotency.Key]int{}}
	var ev events
	app := &counter{}
	h := idempotency.Middleware(st, idempotency.WithWaitForResult(time.Second), idempotency.WithHook(ev.hook))(app)
	var w interface{ Result() *http.Response }
	p := func() (p any) {
		defer func() { p = recover() }()
		w = post(h, "k", `{}`)
		return nil
	}()
	if p != nil {
		t.Fatalf("panic %v went on; want the stop's dropped", p)
	}
	if got := ev.outcomes(); len(got) != 1 || got[0] != idempotency.OutcomeNew {
		t.Errorf("events %v, want one new", got)
	}
	if app.calls.Load() != 1 || w.Result().StatusCode != http.StatusCreated {
		t.Errorf("%d runs, status %d; want the handler's 201", app.calls.Load(), w.Result().StatusCode)
	}
	if e, found, _ := st.Get(context.Background(), idempotency.Key{Key: "k"}); !found || e.State != idempotency.StateCompleted {
		t.Errorf("entry %+v (found %v), want the outcome stored", e, found)
	}
}

// TestWatchStopPanicGivesBackWaitingSlot checks that a request whose
// watch's stop panics gives back its waiting slot (WithMaxWaiters): the
// slot was taken back only after the stop returned, so each such panic
// left one slot taken for good, and once WithMaxWaiters were, no request
// waited again.
func TestWatchStopPanicGivesBackWaitingSlot(t *testing.T) {
	st := &heldOnceStore{Store: newStore(t), claims: map[idempotency.Key]int{}, completed: true}
	h := idempotency.Middleware(st, idempotency.WithWaitForResult(time.Second), idempotency.WithMaxWaiters(1))(&counter{})
	for _, k := range []string{"k1", "k2"} {
		func() {
			defer func() { _ = recover() }() // the stop's, once the replay went out
			if w := post(h, k, `{}`); w.Code != http.StatusCreated {
				t.Errorf("key %s: status %d, want 201 replayed after waiting", k, w.Code)
			}
		}()
	}
}

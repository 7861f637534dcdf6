package idempotency

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
)

// renewScript is a Store whose Renew the test scripts; the keepers call
// nothing else.
type renewScript struct {
	Store
	renew func(ctx context.Context, k Key, token int64, lease time.Duration) error
}

func (s *renewScript) Renew(ctx context.Context, k Key, token int64, lease time.Duration) error {
	return s.renew(ctx, k, token, lease)
}

// The store personalities of the keeper model.
const (
	healthy   = iota // every renewal answers ok within a quarter of a lease
	flaky            // renewals answer ok, fail, hang or find the token superseded
	hangsOnce        // as healthy, but one of the first renewals hangs
)

// modelKeeper is what the model knows of one keeper, on the bubble's time.
type modelKeeper struct {
	lk          *leaseKeeper
	personality int
	stale       bool      // the store now answers ErrStaleToken
	expires     time.Time // the lease lasts at least until then, counting the acknowledged renewals
	lapse       time.Time // the first moment the lease could lapse with no renewal acknowledged, if any
	lastAck     time.Time // when the last renewal was acknowledged
	firstRenew  time.Time // when the first renewal is due: a third of a lease after the claim was sent
	renewals    int
	hangAt      int       // the renewal that hangs, for hangsOnce
	staleAt     time.Time // when a renewal first answered ErrStaleToken
	settledAt   time.Time
	deadline    time.Time // settle deadline
	stoppedAt   time.Time
	inflight    int
	cancels     []time.Time
	causes      []error
	settleCuts  []time.Time
	errs        []string
}

func (mk *modelKeeper) errorf(format string, args ...any) {
	mk.errs = append(mk.errs, fmt.Sprintf(format, args...))
}

// TestLeaseKeepersModel runs many keepers of one shard at once on the fake
// time of a synctest bubble, with wake times out of order (different claim
// round trips and lease answers, handlers that return and keepers that
// leave at random), and checks each one against a model of its lease: the
// handler is cancelled at the moment its lease could lapse, never before
// and never after, unless a renewal was acknowledged before; a superseded
// renewal cancels it at once; a store that answers within a quarter of a
// lease never lets a lease lapse; at most two renewals are in flight; the
// settle deadline cuts the recording calls on time; nothing is sent or
// cancelled after stop.
func TestLeaseKeepersModel(t *testing.T) {
	for seed := range 30 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runKeeperModel(t, uint64(seed)) })
		})
	}
}

func runKeeperModel(t *testing.T, seed uint64) {
	const (
		lease = 3 * time.Second
		n     = 40
	)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var mu sync.Mutex // guards the model and rng after the start
	model := make(map[int64]*modelKeeper, n)
	st := &renewScript{}
	st.renew = func(ctx context.Context, k Key, token int64, l time.Duration) error {
		mu.Lock()
		mk := model[token]
		sent := time.Now()
		if !mk.stoppedAt.IsZero() && sent.After(mk.stoppedAt) {
			mk.errorf("renewal sent at %v, after stop at %v", sent, mk.stoppedAt)
		}
		if mk.renewals == 0 && !sent.Equal(mk.firstRenew) {
			mk.errorf("first renewal sent at %v, want %v", sent, mk.firstRenew)
		}
		mk.renewals++
		mk.inflight++
		if mk.inflight > maxInflight {
			mk.errorf("%d renewals in flight", mk.inflight)
		}
		var delay time.Duration
		kind := 0 // ok, 1 fail, 2 hang, 3 stale
		switch mk.personality {
		case healthy, hangsOnce:
			delay = time.Duration(rng.Int64N(int64(lease / 4)))
			if mk.personality == hangsOnce && mk.renewals == mk.hangAt {
				kind = 2
			}
		default:
			delay = time.Duration(rng.Int64N(int64(lease / 2)))
			switch r := rng.IntN(20); {
			case r < 4:
				kind = 1
			case r < 7:
				kind = 2
			case r < 8:
				kind = 3
			}
		}
		mu.Unlock()
		var err error
		switch kind {
		case 2:
			<-ctx.Done()
			err = ctx.Err()
		default:
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		mk.inflight--
		now := time.Now()
		switch {
		case err != nil:
		case kind == 3 || mk.stale:
			if !mk.stale {
				mk.stale, mk.staleAt = true, now
			}
			err = ErrStaleToken
		case kind == 1:
			err = errors.New("renewal failed")
		default:
			if mk.lapse.IsZero() && now.After(mk.expires) {
				mk.lapse = mk.expires
			}
			if e := sent.Add(l); e.After(mk.expires) {
				mk.expires = e
			}
			mk.lastAck = now
		}
		return err
	}
	h := Middleware(st, withClock(clock.Real), WithLease(lease),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))(http.NotFoundHandler())
	m := h.(*middleware)

	var wg sync.WaitGroup
	mu.Lock() // the keepers' goroutines wait for the setup's use of rng
	for i := range n {
		token := int64(i + 1)
		mk := &modelKeeper{lk: new(leaseKeeper), personality: rng.IntN(3), hangAt: 1 + rng.IntN(4)}
		model[token] = mk
		q := &request{m: m, r: httptest.NewRequest(http.MethodPost, "/", nil)}
		q.claim.key = Key{Key: fmt.Sprintf("key-%03d-a", i)} // one shard: same length, same last byte
		q.claim.token = token
		at := time.Duration(rng.Int64N(int64(2 * lease)))
		rtt := time.Duration(rng.Int64N(int64(lease / 4)))
		left := lease
		if mk.personality == flaky && rng.IntN(2) == 0 {
			left = lease/2 + rtt + time.Duration(rng.Int64N(int64(lease/2-rtt)))
		}
		runs := time.Duration(rng.Int64N(int64(3 * lease)))
		timeout := time.Duration(1 + rng.Int64N(int64(lease)))
		recording := time.Duration(rng.Int64N(int64(2 * timeout)))
		wg.Go(func() {
			time.Sleep(at)
			now := time.Now()
			sent := now.Add(-rtt)
			mu.Lock()
			mk.expires = sent.Add(left)
			mk.firstRenew = sent.Add(lease / 3)
			mu.Unlock()
			cancel := func(cause error) {
				mu.Lock()
				defer mu.Unlock()
				now := time.Now()
				if len(mk.cancels) > 0 {
					return // a context.CancelCauseFunc keeps the first cause
				}
				mk.cancels, mk.causes = append(mk.cancels, now), append(mk.causes, cause)
				if errors.Is(cause, errLeaseUnconfirmed) && now.Before(mk.expires) && !now.Equal(mk.lastAck) {
					mk.errorf("cancelled at %v, before the lease could lapse at %v", now, mk.expires)
				}
				if !mk.settledAt.IsZero() && now.After(mk.settledAt) {
					mk.errorf("cancelled at %v, after the handler returned at %v", now, mk.settledAt)
				}
			}
			mk.lk.base = sent // the keeper counts its times from it
			mk.lk.start(q, int64(now.Sub(sent)), int64(left), cancel)
			time.Sleep(runs)
			mu.Lock()
			mk.settledAt = time.Now()
			mk.deadline = mk.settledAt.Add(timeout)
			if mk.lapse.IsZero() && mk.settledAt.After(mk.expires) {
				mk.lapse = mk.expires
			}
			mu.Unlock()
			mk.lk.settle(timeout, settleCut(func() {
				mu.Lock()
				defer mu.Unlock()
				mk.settleCuts = append(mk.settleCuts, time.Now())
			}))
			time.Sleep(recording)
			mk.lk.stop()
			mu.Lock()
			mk.stoppedAt = time.Now()
			mu.Unlock()
		})
	}
	mu.Unlock()
	wg.Wait()
	synctest.Wait()
	time.Sleep(10 * lease) // renewals still in flight end, and the queue's last timer fires
	synctest.Wait()

	for token, mk := range model {
		for _, e := range mk.errs {
			t.Errorf("keeper %d: %s", token, e)
		}
		// The first reason to cancel, if any came before the handler returned.
		var want time.Time
		var wantCause error
		if !mk.lapse.IsZero() && mk.lapse.Before(mk.settledAt) {
			want, wantCause = mk.lapse, errLeaseUnconfirmed
		}
		if !mk.staleAt.IsZero() && mk.staleAt.Before(mk.settledAt) && (want.IsZero() || mk.staleAt.Before(want)) {
			want, wantCause = mk.staleAt, errLeaseSuperseded
		}
		switch {
		case want.IsZero() && len(mk.cancels) > 0:
			if !mk.cancels[0].Equal(mk.settledAt) && !mk.cancels[0].Equal(mk.lastAck) {
				t.Errorf("keeper %d: cancelled at %v (%v) with no reason", token, mk.cancels[0], mk.causes[0])
			}
		case !want.IsZero() && len(mk.cancels) == 0:
			t.Errorf("keeper %d: never cancelled; its lease could lapse at %v (%v), and the handler returned at %v", token, want, wantCause, mk.settledAt)
		case !want.IsZero() && mk.cancels[0].After(want):
			t.Errorf("keeper %d: cancelled at %v (%v), after %v (%v)", token, mk.cancels[0], mk.causes[0], want, wantCause)
		case !want.IsZero() && !errors.Is(mk.causes[0], wantCause) && !mk.cancels[0].Equal(want):
			t.Errorf("keeper %d: cancelled with %v, want %v", token, mk.causes[0], wantCause)
		}
		if mk.renewals == 0 && mk.stoppedAt.After(mk.firstRenew) {
			t.Errorf("keeper %d: no renewal sent; the first was due at %v, and it stopped at %v", token, mk.firstRenew, mk.stoppedAt)
		}
		if mk.personality != flaky && len(mk.cancels) > 0 {
			t.Errorf("keeper %d: a store answering within a quarter of a lease, yet the handler was cancelled at %v (%v)", token, mk.cancels[0], mk.causes[0])
		}
		switch {
		case mk.deadline.Before(mk.stoppedAt):
			if len(mk.settleCuts) != 1 || !mk.settleCuts[0].Equal(mk.deadline) {
				t.Errorf("keeper %d: settle calls cut at %v, want once at %v", token, mk.settleCuts, mk.deadline)
			}
		case mk.deadline.After(mk.stoppedAt) && len(mk.settleCuts) > 0:
			t.Errorf("keeper %d: settle calls cut at %v after stop at %v", token, mk.settleCuts, mk.stoppedAt)
		}
	}
	for i := range m.keepers {
		kq := &m.keepers[i]
		if kq.lanes[0].head != nil || kq.lanes[1].head != nil {
			t.Errorf("queue %d: keepers left in it after stop", i)
		}
	}
}

// settleCut is a keeper's settle deadline as a function the model records
// it with.
type settleCut func()

func (f settleCut) end() { f() }

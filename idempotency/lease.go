package idempotency

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/saferetry/saferetry/internal/clock"
)

// ErrLeaseLost is the cause of a handler's request context that the
// Middleware cancelled because the claim the handler runs under is gone, or
// may be: a renewal found its fencing token superseded (another request
// took the key over), or no renewal was acknowledged before the lease could
// lapse, so that another instance may take the key over at any moment. A
// handler reads it with context.Cause(r.Context()) and should stop without
// side effects: its outcome may not be stored. It is also wrapped by the Err
// of OutcomeLeaseLost events. Match it with errors.Is.
var ErrLeaseLost = errors.New("idempotency: lease lost")

// The causes the Middleware cancels a handler with; both match ErrLeaseLost.
var (
	errLeaseSuperseded  = fmt.Errorf("%w: another request took the key over (fencing token superseded)", ErrLeaseLost)
	errLeaseUnconfirmed = fmt.Errorf("%w: no renewal was acknowledged before the lease could lapse", ErrLeaseLost)
)

// errClaimTooLate is the Err of the OutcomeInProgress event of a request
// whose claim was acquired with too little of its lease left to start the
// handler.
var errClaimTooLate = errors.New("idempotency: the claim's answer came with less than half of its lease left; the handler was not started")

// leaseKeeper keeps a claim's lease alive from the moment it is acquired
// until its outcome is recorded (Complete or Release acknowledged), not
// only while the handler runs. It runs on one timer rather than a goroutine
// of its own, so a request that settles within a third of a lease costs no
// renewal at all; and it waits on its shard's keeperQueue, which shares one
// timer among many requests, until its first renewal or its settle
// deadline comes due, so that such a request starts no timer either.
//
// Time is counted conservatively on the local clock, from the claim's
// sending (see leaseKeeper.now): a claim or renewal
// sent at t, which the store granted with lease d left, lasts at least until
// t+d, whenever the store received it. When that moment passes with no newer
// renewal acknowledged, the lease may have lapsed and another instance may
// take the key over, so the handler's context is cancelled with
// errLeaseUnconfirmed; renewals go on regardless, since a Renew still
// succeeds as long as nobody took over. A renewal answered with
// ErrStaleToken cancels the handler with errLeaseSuperseded.
//
// The same timer bounds the store calls that record the outcome: once
// settle is called, it cancels their context at the settle deadline, which
// saves a second timer per request.
//
// The application's code that it calls on its timer (the logger, the
// store's Renew) may panic where nothing would recover it: such a panic is
// kept for the request, and the keeper goes on (see keeperPanic).
type leaseKeeper struct {
	q             *request // whose claim is kept; its key and token do not change
	cancelHandler context.CancelCauseFunc

	// Its place in its keeperQueue, guarded by the queue's lock: lane is 0
	// when it is in none, and wake is when it wakes there.
	prev, next *leaseKeeper
	wake       int64
	lane       uint8 // beside the fields below, which pack into one word
	shard      uint8 // its keeperQueue in the Middleware's; set by start

	mu              sync.Mutex
	inflight        int32 // Renew calls in flight, at most maxInflight
	cancelled       bool  // the handler's context was cancelled
	lost            bool  // a renewal was refused: the token is superseded
	stopped         bool
	settling        bool
	settleCancelled bool
	panicked        bool        // a panic is kept for the request (see keeperPanic)
	timer           clock.Timer // its own, once woken by its queue; nil until then
	// base is when the claim was sent, and baseWake that time as its
	// queue's wake time; its other times are offsets from base (see now).
	base           time.Time
	baseWake       int64
	expires        int64         // the lease lasts at least until then
	latest         int64         // and at most until then (the last answer's arrival plus a lease)
	rtt            time.Duration // the store's round trip, as lately seen
	nextRenew      int64
	settleDeadline int64
	cancelSettle   settleCanceller
}

// start begins keeping q's claim, asked for at lk.base and lasting until
// expires, at now (offsets from lk.base, see now); cancel cancels the
// handler's context.
func (lk *leaseKeeper) start(q *request, now, expires int64, cancel context.CancelCauseFunc) {
	lk.mu.Lock() // tick reads the fields
	defer lk.mu.Unlock()
	lk.q, lk.cancelHandler = q, cancel
	lk.expires = expires
	lk.latest = clock.Later(now, q.m.cfg.lease)
	lk.rtt = clock.Between(0, now)
	lk.nextRenew = clock.Later(0, lk.interval())
	k := q.claim.key.Key
	lk.shard = (k[len(k)-1] ^ byte(len(k))) % keeperShards // keys are never empty
	lk.baseWake = lk.queue().wakeOf(lk.base)
	at, _ := lk.wakeAt() // a renewal is always due
	lk.queue().join(lk, laneRenew, lk.queued(at), lk.queued(now))
}

// now reads the clock as the keeper counts its times: as the time since
// base, the claim's sending, which keeps every time of one claim within
// an int64's reach of the others, whatever the clock read when the
// Middleware was made.
func (lk *leaseKeeper) now() int64 { return int64(clock.Since(lk.q.m.cfg.clock, lk.base)) }

// queued is t, an offset from base, as its queue's wake time. A base
// further before the queue's epoch than an int64 counts (a fake clock set
// back) gives the least wake time, due at once, as its times are: counted
// from the saturated offset they would come due only as late as that
// offset is wrong, if ever.
func (lk *leaseKeeper) queued(t int64) int64 {
	if lk.baseWake == math.MinInt64 {
		return math.MinInt64
	}
	return clock.Later(lk.baseWake, time.Duration(t))
}

func (lk *leaseKeeper) queue() *keeperQueue { return &lk.q.m.keepers[lk.shard] }

// detached is the context of the store calls and logs of the keeper: the
// request's, without its cancellation.
func (lk *leaseKeeper) detached() context.Context { return context.WithoutCancel(lk.q.r.Context()) }

// interval is the time between renewals that succeed: a third of the
// lease, whatever its length (a floor would renew a lease no longer than it
// only once it could lapse), and at least a nanosecond, so that the timer
// of a lease under 3 ns does not spin.
func (lk *leaseKeeper) interval() time.Duration { return max(lk.q.m.cfg.lease/3, 1) }

// arm sets the timer for the next thing to do: the next renewal (unless
// maxInflight are in flight, the last of which re-arms the timer when it
// returns, or the lease is lost), cancelling the handler when the lease
// could lapse, or the settle deadline. A keeper still waiting in its queue
// moves there instead; one woken by it makes its own timer. The lock must
// be held.
func (lk *leaseKeeper) arm(now int64) {
	at, ok := lk.wakeAt()
	lane := uint8(laneRenew)
	if lk.settling {
		lane = laneSettle
	}
	if lk.queue().move(lk, lane, lk.queued(at), ok, lk.queued(now)) || !ok {
		return
	}
	d := max(clock.Between(now, at), 0)
	if lk.timer == nil {
		lk.timer = lk.q.m.cfg.clock.AfterFunc(d, lk.tick)
	} else {
		lk.timer.Reset(d)
	}
}

// wakeAt returns when the timer should fire, if at all (ok). The lock
// must be held.
func (lk *leaseKeeper) wakeAt() (at int64, ok bool) {
	if lk.inflight < maxInflight && !lk.lost {
		at, ok = lk.nextRenew, true
	}
	if !lk.cancelled && !lk.settling && (!ok || lk.expires < at) {
		at, ok = lk.expires, true
	}
	if lk.settling && !lk.settleCancelled && (!ok || lk.settleDeadline < at) {
		at, ok = lk.settleDeadline, true
	}
	return at, ok
}

// tick does what is due: cancel the settle calls at their deadline, cancel
// the handler when the lease could lapse, send a renewal.
func (lk *leaseKeeper) tick() {
	lk.mu.Lock()
	if lk.stopped {
		lk.mu.Unlock()
		return
	}
	now := lk.now()
	if lk.settling && !lk.settleCancelled && now >= lk.settleDeadline {
		lk.settleCancelled = true
		lk.cancelSettle.end()
	}
	if !lk.cancelled && !lk.settling && now >= lk.expires {
		lk.cancelled = true
		lk.cancelHandler(errLeaseUnconfirmed)
		lk.warn("idempotency: no lease renewal was acknowledged in time; cancelling the handler",
			slog.String("scope", lk.q.claim.key.Scope), slog.String("key", lk.q.claim.key.Key), slog.Int64("token", lk.q.claim.token))
	}
	if lk.lost || lk.inflight >= maxInflight || now < lk.nextRenew {
		lk.arm(now)
		lk.mu.Unlock()
		return
	}
	lk.inflight++
	// A renewal may take as long as the lease can have left by the store's
	// reckoning (it granted the last one before its answer arrived), and at
	// least half a lease: cutting it shorter only throws a working
	// connection away. If it has not answered by the time a failed one
	// would be retried, and well past the round trip lately seen, it may
	// hang: a second one is sent beside it.
	bound := max(clock.Between(now, lk.latest), lk.q.m.cfg.lease/2)
	lk.nextRenew = clock.Later(now, max(retryDelay(lk.interval(), clock.Between(now, lk.expires)), lk.rtt*3/2))
	lk.arm(now)
	lk.mu.Unlock()

	sent := lk.now()
	ctx, cancel := context.WithTimeout(lk.detached(), bound)
	err := lk.renew(ctx)
	cancel()
	lk.renewed(sent, err)
}

// renewed takes in the answer to a renewal sent at sent.
func (lk *leaseKeeper) renewed(sent int64, err error) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	lk.inflight--
	if lk.stopped {
		return
	}
	now := lk.now()
	switch {
	case err == nil:
		lk.rtt = max(clock.Between(sent, now), lk.rtt*3/4)
		if e := clock.Later(sent, lk.q.m.cfg.lease); e > lk.expires {
			lk.expires = e
			lk.nextRenew = clock.Later(sent, lk.interval())
		}
		if l := clock.Later(now, lk.q.m.cfg.lease); l > lk.latest {
			lk.latest = l
		}
	case lk.lost:
		// An earlier answer already settled it.
	case errors.Is(err, ErrStaleToken):
		lk.lost = true
		if !lk.settling {
			// The loss is reported (to the hooks, which run user code)
			// on the request's goroutine, once the handler returns.
			lk.cancelled = true
			lk.cancelHandler(errLeaseSuperseded)
			lk.warn("idempotency: a renewal found the claim taken over; cancelling the handler",
				slog.String("scope", lk.q.claim.key.Scope), slog.String("key", lk.q.claim.key.Key), slog.Int64("token", lk.q.claim.token))
		}
		// While settling, the outcome may have just been recorded, which
		// ends the claim too: the completion's own answer tells.
	default:
		// The lease may still be alive: try again soon enough to renew it
		// before it lapses.
		lk.warn("idempotency: lease renewal failed",
			slog.String("scope", lk.q.claim.key.Scope), slog.String("key", lk.q.claim.key.Key),
			slog.Int64("token", lk.q.claim.token), slog.Any("error", err))
		if retry := clock.Later(now, retryDelay(lk.interval(), clock.Between(now, lk.expires))); retry < lk.nextRenew {
			lk.nextRenew = retry
		}
	}
	lk.arm(now)
}

// maxInflight bounds the renewals of one claim in flight at once.
const maxInflight = 2

// retryDelay is the wait before retrying a failed renewal when the lease has
// left to run: a third of what is left, so that several tries fit before it
// lapses, but no longer than the renewal interval and no shorter than a
// tenth of it (a store that fails at once is not hammered) nor than a
// nanosecond (a lease under 30 ns would have its timer spin). Once the lease
// may have lapsed, renewals go on at the interval: a Renew still succeeds
// as long as nobody took the claim over.
func retryDelay(interval, left time.Duration) time.Duration {
	if left <= 0 {
		return interval
	}
	return min(interval, max(left/3, interval/10, 1))
}

// settleCanceller is what a keeper cancels at the settle deadline: the
// claim's storeCtx (an interface, so that passing it allocates no method
// value).
type settleCanceller interface{ end() }

// settle marks the handler as returned: renewals go on while the outcome is
// recorded, and cancel is ended after timeout, the bound of the store calls
// that record it. It reports whether a renewal already found the lease
// lost, and the time it read (an offset from base, see now). Call stop
// once the outcome is recorded.
func (lk *leaseKeeper) settle(timeout time.Duration, cancel settleCanceller) (lost bool, now int64) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	lk.settling = true
	lk.cancelSettle = cancel
	now = lk.now()
	lk.settleDeadline = clock.Later(now, timeout)
	lk.arm(now)
	return lk.lost, now
}

// stop ends the timer for good, or the wait in its queue, and returns the
// panic kept for the request, if any (see keeperPanic). A renewal still in
// flight finishes on its own; its answer is ignored.
func (lk *leaseKeeper) stop() *keeperPanic {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	lk.stopped = true
	if lk.timer != nil {
		lk.timer.Stop()
	}
	lk.queue().leave(lk)
	return lk.kept()
}

package idempotency_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

// TestNonStorePanicWhileRecordingIsNotAStoreError checks that a panic
// while a request's outcome is recorded that is not the store's (here the
// Middleware's logger, on a store call that failed without panicking) is
// not reported as OutcomeStoreError, which sends whoever reads the metrics
// to a store that is sound: it is reported as a handler's panic is,
// OutcomeReleased with no status (nothing was sent), in lease mode and in
// transactional mode alike.
func TestNonStorePanicWhileRecordingIsNotAStoreError(t *testing.T) {
	transient := errors.New("connection reset")
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) idempotency.Store
	}{
		{"lease mode, Complete failed and is retried", func(t *testing.T) idempotency.Store {
			failed := false
			base := newStore(t)
			return &faultyStore{Store: base, complete: func(ctx context.Context, k idempotency.Key, tok int64, r idempotency.Response, ttl time.Duration) error {
				if !failed {
					failed = true
					return transient
				}
				return base.Complete(ctx, k, tok, r, ttl)
			}}
		}},
		{"lease mode, response not storable", func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
				return idempotency.ErrResponseNotStorable
			}}
		}},
		{"transactional mode, response not storable", func(t *testing.T) idempotency.Store {
			return &fakeTxStore{Store: newStore(t), completeErr: idempotency.ErrResponseNotStorable}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			h := idempotency.Middleware(tc.store(t), idempotency.WithHook(ev.hook),
				idempotency.WithLogger(slog.New(panickingLog{})))(&counter{})
			p := postPanicking(h)
			if s, _ := p.(string); !strings.HasPrefix(s, "log handler broke on: ") {
				t.Fatalf("the request went on with panic %v, want the logger's", p)
			}
			ev.mu.Lock()
			defer ev.mu.Unlock()
			if len(ev.got) != 1 {
				t.Fatalf("%d events %v, want 1", len(ev.got), ev.got)
			}
			e := ev.got[0]
			if e.Outcome != idempotency.OutcomeReleased || e.Status != 0 || e.Err == nil {
				t.Errorf("event %s status %d err %v, want %s, no status, an error", e.Outcome, e.Status, e.Err, idempotency.OutcomeReleased)
			}
		})
	}
}

// lateClaims is a Store whose claims come back with almost none of their
// lease left, too late for the Middleware to run the handler.
type lateClaims struct{ idempotency.Store }

func (s lateClaims) Claim(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, k, fp, lease, ttl)
	if res.Acquired {
		res.LeaseRemaining = time.Nanosecond
	}
	return res, err
}

// TestPanickingLoggerStillGivesOneEvent checks that a request whose
// Middleware's logger panics where the Middleware logs before it gives the
// event (a store failure, a claim too late, a claim taken over, a lease
// lost, a failed commit, a scope error) still gives its one event, with its
// outcome and no status (the answer it describes is not sent), before the
// panic goes on, as a handler's panic does: metrics fed by the hook would
// otherwise miss it.
func TestPanickingLoggerStillGivesOneEvent(t *testing.T) {
	down := errors.New("store down")
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) idempotency.Store
		opts  []idempotency.Option
		want  idempotency.Outcome
	}{
		{"claim failed", func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), claim: func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
				return idempotency.ClaimResult{}, down
			}}
		}, nil, idempotency.OutcomeStoreError},
		{"claim failed, fail open", func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), claim: func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
				return idempotency.ClaimResult{}, down
			}}
		}, []idempotency.Option{idempotency.WithFailOpen(true)}, idempotency.OutcomeStoreError},
		{"claim too late", func(t *testing.T) idempotency.Store { return lateClaims{newStore(t)} }, nil, idempotency.OutcomeInProgress},
		// The handler does not run: the claim is left to its lease, as
		// after a logger's panic while the outcome is recorded.
		{"claim taken over", func(t *testing.T) idempotency.Store {
			base := newStore(t)
			return &faultyStore{Store: base, claim: func(ctx context.Context, k idempotency.Key, fp string, lease, ttl time.Duration) (idempotency.ClaimResult, error) {
				res, err := base.Claim(ctx, k, fp, lease, ttl)
				res.TookOver = true
				return res, err
			}}
		}, nil, idempotency.OutcomeReleased},
		{"lease lost on Complete", func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
				return idempotency.ErrStaleToken
			}}
		}, nil, idempotency.OutcomeLeaseLost},
		{"commit failed", func(t *testing.T) idempotency.Store {
			return &fakeTxStore{Store: newStore(t), commitErr: down}
		}, nil, idempotency.OutcomeStoreError},
		{"scope error", func(t *testing.T) idempotency.Store { return newStore(t) },
			[]idempotency.Option{idempotency.WithScope(func(*http.Request) (string, error) { return "", down })}, idempotency.OutcomeScopeError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			opts := append([]idempotency.Option{idempotency.WithHook(ev.hook), idempotency.WithLogger(slog.New(panickingLog{}))}, tc.opts...)
			h := idempotency.Middleware(tc.store(t), opts...)(&counter{})
			p := postPanicking(h)
			if s, _ := p.(string); !strings.HasPrefix(s, "log handler broke on: ") {
				t.Fatalf("the request went on with panic %v, want the logger's", p)
			}
			ev.mu.Lock()
			defer ev.mu.Unlock()
			if len(ev.got) != 1 {
				t.Fatalf("%d events %v, want 1", len(ev.got), ev.got)
			}
			if e := ev.got[0]; e.Outcome != tc.want || e.Status != 0 {
				t.Errorf("event %s status %d, want %s with no status (nothing was sent)", e.Outcome, e.Status, tc.want)
			}
		})
	}
}

// TestPanickingHookLeavesTheOthersTheirEvent checks that every hook gets a
// request's event though a hook given before it panics (the application's
// own hook beside the metrics, say), as WithHook promises: the panic goes
// on once every hook had the event, and the metrics count the request.
func TestPanickingHookLeavesTheOthersTheirEvent(t *testing.T) {
	var ev events
	h := idempotency.Middleware(newStore(t),
		idempotency.WithHook(func(idempotency.Event) { panic("app hook broke") }),
		idempotency.WithHook(ev.hook))(&counter{})
	p := postPanicking(h)
	if p != "app hook broke" {
		t.Fatalf("the request went on with panic %v, want the hook's", p)
	}
	if got := ev.outcomes(); len(got) != 1 || got[0] != idempotency.OutcomeNew {
		t.Fatalf("the second hook got %v, want one %s", got, idempotency.OutcomeNew)
	}
}

// TestStorePanicWhileClaimingGivesOneEvent checks that a request whose
// store panics while it claims the key (lease mode's Claim, a
// transaction's Claim) gives its one event, OutcomeStoreError with no
// status, before the panic goes on, as one whose store panics while its
// outcome is recorded does: metrics fed by the hook would otherwise miss
// it.
func TestStorePanicWhileClaimingGivesOneEvent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) idempotency.Store
	}{
		{"lease mode", func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), claim: func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
				panic("store bug in claim")
			}}
		}},
		{"transactional mode", func(t *testing.T) idempotency.Store {
			return &fakeTxStore{Store: newStore(t), panicClaim: true}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			app := &counter{}
			h := idempotency.Middleware(tc.store(t), idempotency.WithHook(ev.hook))(app)
			p := postPanicking(h)
			if s, _ := p.(string); !strings.Contains(s, "bug in claim") {
				t.Fatalf("the request went on with panic %v, want the store's", p)
			}
			if n := app.calls.Load(); n != 0 {
				t.Fatalf("the handler ran %d times, want none", n)
			}
			ev.mu.Lock()
			defer ev.mu.Unlock()
			if len(ev.got) != 1 {
				t.Fatalf("%d events %v, want 1", len(ev.got), ev.got)
			}
			if e := ev.got[0]; e.Outcome != idempotency.OutcomeStoreError || e.Status != 0 || e.Err == nil {
				t.Errorf("event %s status %d err %v, want %s, no status, an error", e.Outcome, e.Status, e.Err, idempotency.OutcomeStoreError)
			}
		})
	}
}

// panickingWatch is a memstore whose Watch panics, as a store with a bug
// might.
type panickingWatch struct{ *memstore.Store }

func (panickingWatch) Watch(context.Context, idempotency.Key) (<-chan struct{}, func(), error) {
	panic("store bug in watch")
}

// TestStorePanicWhileWaitingGivesOneEvent checks that a duplicate that
// waits for the key's holder (WithWaitForResult) and whose store panics
// while it sets up its watch gives its one event, OutcomeStoreError with
// no status, before the panic goes on; the holder gives its own.
func TestStorePanicWhileWaitingGivesOneEvent(t *testing.T) {
	var ev events
	app, started, release := blockFirst()
	h := idempotency.Middleware(panickingWatch{newStore(t)}, idempotency.WithHook(ev.hook),
		idempotency.WithWaitForResult(time.Minute))(app)
	first := make(chan int, 1)
	go func() { first <- post(h, "k", `{}`).Code }()
	<-started
	p := postPanicking(h)
	close(release)
	if c := <-first; c != http.StatusCreated {
		t.Fatalf("the holder got %d, want 201", c)
	}
	if s, _ := p.(string); s != "store bug in watch" {
		t.Fatalf("the duplicate went on with panic %v, want the store's", p)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.got) != 2 {
		t.Fatalf("%d events %v, want 2 (the duplicate's and the holder's)", len(ev.got), ev.got)
	}
	if e := ev.got[0]; e.Outcome != idempotency.OutcomeStoreError || e.Status != 0 || e.Err == nil {
		t.Errorf("the duplicate's event %s status %d err %v, want %s, no status, an error", e.Outcome, e.Status, e.Err, idempotency.OutcomeStoreError)
	}
}

// TestHandlerPanicAfterStreamingReportsTheStatusSent checks that the event
// of a handler that panics after its response began to stream (it outgrew
// what the Middleware records) carries the status that went out, as
// Event.Status promises and as the event of a store's panic at that point
// does: the client did get that status line.
func TestHandlerPanicAfterStreamingReportsTheStatusSent(t *testing.T) {
	var ev events
	h := idempotency.Middleware(newStore(t), idempotency.WithHook(ev.hook), idempotency.WithMaxResponseBody(16))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(strings.Repeat("x", 64)))
			panic("handler bug after streaming")
		}))
	w := httptest.NewRecorder()
	func() {
		defer func() { _ = recover() }()
		r := httptest.NewRequest(http.MethodPost, "/ops", strings.NewReader(`{}`))
		r.Header.Set(idempotency.HeaderIdempotencyKey, "k")
		h.ServeHTTP(w, r)
	}()
	if w.Code != http.StatusAccepted {
		t.Fatalf("the client got %d, want the streamed 202; the test proves nothing", w.Code)
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.got) != 1 {
		t.Fatalf("%d events %v, want 1", len(ev.got), ev.got)
	}
	if e := ev.got[0]; e.Outcome != idempotency.OutcomeReleased || e.Status != http.StatusAccepted {
		t.Errorf("event %s status %d, want %s with the status sent, %d", e.Outcome, e.Status, idempotency.OutcomeReleased, http.StatusAccepted)
	}
}

// TestPanickingHookKeepsThePanicInFlight checks that a hook that panics on
// the event the Middleware gives while a panic is in flight (the
// handler's; the store's, while the key is claimed or the outcome
// recorded; the logger's before an answer) does not replace that panic: the one that tells what broke goes
// on as it was, as it did before such requests gave an event, and every
// hook still gets the event once.
func TestPanickingHookKeepsThePanicInFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) idempotency.Store
		opts  []idempotency.Option
		want  string // the panic that goes on
	}{
		{"store panics in Claim", func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), claim: func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
				panic("store bug in claim")
			}}
		}, nil, "store bug in claim"},
		{"store panics in Complete", func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), complete: func(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
				panic("store bug in complete")
			}}
		}, nil, "store bug in complete"},
		{"Commit panics", func(t *testing.T) idempotency.Store {
			return &fakeTxStore{Store: newStore(t), panicCommit: true}
		}, nil, "driver bug"},
		{"handler panics", func(t *testing.T) idempotency.Store { return newStore(t) }, nil, "handler bug"},
		{"handler panics, claim taken over", func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), release: func(context.Context, idempotency.Key, int64) error {
				return idempotency.ErrStaleToken
			}}
		}, nil, "handler bug"},
		{"handler panics, transactional mode", func(t *testing.T) idempotency.Store {
			return &fakeTxStore{Store: newStore(t)}
		}, nil, "handler bug"},
		{"logger panics on a store failure", func(t *testing.T) idempotency.Store {
			return &faultyStore{Store: newStore(t), claim: func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
				return idempotency.ClaimResult{}, errors.New("store down")
			}}
		}, []idempotency.Option{idempotency.WithLogger(slog.New(panickingLog{}))}, "log handler broke on: idempotency: store failed; answering 503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			opts := append([]idempotency.Option{
				idempotency.WithHook(func(idempotency.Event) { panic("hook broke") }),
				idempotency.WithHook(ev.hook)}, tc.opts...)
			app := &counter{before: func(http.ResponseWriter, *http.Request) int {
				if tc.want == "handler bug" {
					panic("handler bug")
				}
				return http.StatusCreated
			}}
			h := idempotency.Middleware(tc.store(t), opts...)(app)
			p := postPanicking(h)
			if p != tc.want {
				t.Errorf("the request went on with panic %v, want %q", p, tc.want)
			}
			if got := ev.outcomes(); len(got) != 1 {
				t.Errorf("the second hook got %v, want one event", got)
			}
		})
	}
}

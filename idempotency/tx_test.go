package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// fakeTxStore is a TxStore over a memory store: claims go to the store at
// once (with a long lease), while the handler's writes and the outcome wait
// in the transaction until Commit. Rollback releases the claim.
type fakeTxStore struct {
	idempotency.Store
	mu        sync.Mutex
	ledger    []string // committed handler writes
	commitErr error
	claimErr  error
	// completeErr, if set, is what every Complete of a transaction answers.
	completeErr error
	// panicClaim makes a transaction's Claim panic, as a driver with a bug
	// might.
	panicClaim bool
	// hangCommit and hangRollback make Commit and Rollback block until
	// their context is done, like a database that stopped answering.
	hangCommit   bool
	hangRollback bool
	panicCommit  bool
	// panicRollback makes Rollback panic, as a driver with a bug might
	// after its Commit panicked.
	panicRollback bool
	// rollbackCtxErr records ctx.Err() as each Rollback was called.
	rollbackCtxErr []error
	begun          int
	open           int // transactions neither committed nor rolled back
}

var _ idempotency.TxStore = (*fakeTxStore)(nil)

func (s *fakeTxStore) BeginTx(ctx context.Context) (idempotency.Tx, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.begun++
	s.open++
	return &fakeTx{s: s}, nil
}

func (s *fakeTxStore) committed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ledger...)
}

type fakeTx struct {
	s       *fakeTxStore
	k       idempotency.Key
	token   int64
	claimed bool
	writes  []string
	resp    *idempotency.Response
	ttl     time.Duration
	done    bool
}

type fakeTxCtxKey struct{}

func (tx *fakeTx) Context(ctx context.Context) context.Context {
	return context.WithValue(ctx, fakeTxCtxKey{}, tx)
}

func (tx *fakeTx) Claim(ctx context.Context, k idempotency.Key, fp string, ttl time.Duration) (idempotency.ClaimResult, error) {
	tx.s.mu.Lock()
	err, boom := tx.s.claimErr, tx.s.panicClaim
	tx.s.mu.Unlock()
	if boom {
		panic("driver bug in claim")
	}
	if err != nil {
		return idempotency.ClaimResult{}, err
	}
	res, err := tx.s.Store.Claim(ctx, k, fp, time.Hour, ttl)
	if err == nil && res.Acquired {
		tx.k, tx.token, tx.claimed = k, res.Token, true
	}
	return res, err
}

func (tx *fakeTx) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	tx.s.mu.Lock()
	err := tx.s.completeErr
	tx.s.mu.Unlock()
	if err != nil {
		return err
	}
	if !tx.claimed || k != tx.k || token != tx.token {
		return idempotency.ErrStaleToken
	}
	// Like a store, it copies what it keeps (TxStore.Complete): the
	// Middleware hands the Header map back to a pool once Complete returns.
	resp.Header, resp.Body = resp.Header.Clone(), bytes.Clone(resp.Body)
	tx.resp, tx.ttl = &resp, ttl
	return nil
}

func (tx *fakeTx) Commit(ctx context.Context) error {
	tx.s.mu.Lock()
	err, hang, boom := tx.s.commitErr, tx.s.hangCommit, tx.s.panicCommit
	tx.s.mu.Unlock()
	if boom {
		panic("driver bug")
	}
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	if tx.resp != nil {
		if err := tx.s.Store.Complete(ctx, tx.k, tx.token, *tx.resp, tx.ttl); err != nil {
			return err
		}
	}
	tx.s.mu.Lock()
	tx.s.ledger = append(tx.s.ledger, tx.writes...)
	tx.s.open--
	tx.s.mu.Unlock()
	tx.done = true
	return nil
}

func (tx *fakeTx) Rollback(ctx context.Context) error {
	tx.s.mu.Lock()
	tx.s.rollbackCtxErr = append(tx.s.rollbackCtxErr, ctx.Err())
	hang, boom := tx.s.hangRollback, tx.s.panicRollback
	tx.s.mu.Unlock()
	if boom {
		panic("driver bug in rollback")
	}
	if tx.done {
		return nil
	}
	if hang {
		<-ctx.Done()
		tx.s.mu.Lock()
		tx.s.open-- // the database gives up on the transaction
		tx.s.mu.Unlock()
		tx.done = true
		return ctx.Err()
	}
	tx.done = true
	tx.s.mu.Lock()
	tx.s.open--
	tx.s.mu.Unlock()
	if tx.claimed {
		return tx.s.Store.Release(ctx, tx.k, tx.token)
	}
	return nil
}

// ledgerApp writes "debit" through the transaction in its context.
func ledgerApp(t *testing.T, status func(n int) int) (*counter, http.Handler) {
	app := &counter{}
	app.before = func(w http.ResponseWriter, r *http.Request) int {
		tx, ok := r.Context().Value(fakeTxCtxKey{}).(*fakeTx)
		if !ok {
			t.Errorf("handler runs without the transaction in its context")
			return http.StatusInternalServerError
		}
		tx.writes = append(tx.writes, "debit")
		w.Header().Set("Set-Cookie", "handler=1")
		if status != nil {
			return status(int(app.calls.Load()))
		}
		return 0
	}
	return app, app
}

// wantRetryCommits fails unless a retry of POST k to mw runs the handler
// afresh, as its execution n, and answers 201, after which one debit is
// committed and no transaction is left open.
func wantRetryCommits(t *testing.T, mw http.Handler, st *fakeTxStore, app *counter, n int64) {
	t.Helper()
	if w := post(mw, "k", `{}`); w.Code != http.StatusCreated || app.calls.Load() != n {
		t.Fatalf("retry = %d, executions %d; want 201 from a fresh run, execution %d", w.Code, app.calls.Load(), n)
	}
	if got := st.committed(); len(got) != 1 || st.open != 0 {
		t.Fatalf("ledger %v, %d open", got, st.open)
	}
}

func TestTransactionalMode(t *testing.T) {
	t.Run("commit then answer, replay after", func(t *testing.T) {
		st := &fakeTxStore{Store: newStore(t)}
		app, h := ledgerApp(t, nil)
		mw := idempotency.Middleware(st)(h)
		first := post(mw, "k", `{}`)
		if first.Code != http.StatusCreated {
			t.Fatalf("status = %d", first.Code)
		}
		wantReplay(t, post(mw, "k", `{}`), first)
		wantProblem(t, post(mw, "k", `{"x":1}`), http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
		if got := st.committed(); len(got) != 1 || app.calls.Load() != 1 {
			t.Fatalf("ledger %v, executions %d; want one debit", got, app.calls.Load())
		}
		if st.open != 0 {
			t.Fatalf("%d transactions left open", st.open)
		}
	})
	t.Run("5xx rolls back", func(t *testing.T) {
		st := &fakeTxStore{Store: newStore(t)}
		app, h := ledgerApp(t, func(n int) int {
			if n == 1 {
				return http.StatusInternalServerError
			}
			return 0
		})
		mw := idempotency.Middleware(st)(h)
		if w := post(mw, "k", `{}`); w.Code != http.StatusInternalServerError {
			t.Fatalf("first = %d, want the handler's 500", w.Code)
		}
		if got := st.committed(); len(got) != 0 {
			t.Fatalf("ledger %v after a 500", got)
		}
		wantRetryCommits(t, mw, st, app, 2)
	})
	t.Run("panic rolls back and goes on", func(t *testing.T) {
		st := &fakeTxStore{Store: newStore(t)}
		var ev events
		app := &counter{}
		app.before = func(w http.ResponseWriter, r *http.Request) int {
			tx := r.Context().Value(fakeTxCtxKey{}).(*fakeTx)
			tx.writes = append(tx.writes, "debit")
			if app.calls.Load() == 1 {
				panic("boom")
			}
			return 0
		}
		mw := idempotency.Middleware(st, idempotency.WithHook(ev.hook))(app)
		func() {
			defer func() {
				if p := recover(); p != "boom" {
					t.Errorf("recovered %v, want the handler's panic", p)
				}
			}()
			post(mw, "k", `{}`)
		}()
		if e, ok := ev.find(idempotency.OutcomeReleased); !ok || !errors.Is(e.Err, idempotency.ErrHandlerPanicked) {
			t.Fatalf("events %v", ev.outcomes())
		}
		wantRetryCommits(t, mw, st, app, 2)
	})
	t.Run("failed commit sends nothing of the handler's response", func(t *testing.T) {
		st := &fakeTxStore{Store: newStore(t), commitErr: errors.New("connection lost")}
		var ev events
		app, h := ledgerApp(t, nil)
		mw := idempotency.Middleware(st, idempotency.WithHook(ev.hook))(h)
		w := post(mw, "k", `{}`)
		wantProblem(t, w, http.StatusServiceUnavailable, idempotency.ProblemCommitFailed)
		if w.Header().Get("Set-Cookie") != "" || w.Header().Get("Location") != "" {
			t.Fatalf("the handler's headers leaked into the problem: %v", w.Header())
		}
		if w.Header().Get("Retry-After") == "" {
			t.Fatalf("no Retry-After")
		}
		if e, ok := ev.find(idempotency.OutcomeStoreError); !ok || e.Status != http.StatusServiceUnavailable {
			t.Fatalf("events %v", ev.outcomes())
		}
		st.mu.Lock()
		st.commitErr = nil
		st.mu.Unlock()
		wantRetryCommits(t, mw, st, app, 2)
	})
	t.Run("in progress answers 409 without holding a transaction", func(t *testing.T) {
		st := &fakeTxStore{Store: newStore(t)}
		app, started, release := blockEach()
		mw := idempotency.Middleware(st)(app)
		done := make(chan struct{})
		go func() { post(mw, "k", `{}`); close(done) }()
		<-started
		wantProblem(t, post(mw, "k", `{}`), http.StatusConflict, idempotency.ProblemInProgress)
		st.mu.Lock()
		open := st.open
		st.mu.Unlock()
		if open != 1 {
			t.Fatalf("%d transactions open, want only the running one", open)
		}
		close(release)
		<-done
	})
	t.Run("oversize response is buffered whole and recorded", func(t *testing.T) {
		st := &fakeTxStore{Store: newStore(t)}
		app := &counter{}
		mw := idempotency.Middleware(st, idempotency.WithMaxResponseBody(8))(app)
		first := post(mw, "k", `{"long":"enough to pass the cap"}`)
		if first.Code != http.StatusCreated || first.Body.Len() <= 8 {
			t.Fatalf("first = %d %q", first.Code, first.Body)
		}
		p := wantProblem(t, post(mw, "k", `{"long":"enough to pass the cap"}`), http.StatusGone, idempotency.ProblemResponseTooLarge)
		if p.OriginalStatus != http.StatusCreated || app.calls.Load() != 1 {
			t.Fatalf("problem %+v, executions %d", p, app.calls.Load())
		}
	})
	t.Run("rollbacks are bounded when the database hangs", func(t *testing.T) {
		st := &fakeTxStore{Store: newStore(t), claimErr: errors.New("claim failed"), hangRollback: true}
		app := &counter{}
		mw := idempotency.Middleware(st, idempotency.WithStoreTimeout(20*time.Millisecond))(app)
		done := make(chan int, 1)
		go func() { done <- post(mw, "k", `{}`).Code }()
		select {
		case code := <-done:
			if code != http.StatusServiceUnavailable || app.calls.Load() != 0 {
				t.Fatalf("status %d, executions %d; want 503 without running", code, app.calls.Load())
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a hung Rollback after a failed claim held the request")
		}
	})
	t.Run("rollback after a timed-out commit gets a live context", func(t *testing.T) {
		st := &fakeTxStore{Store: newStore(t), hangCommit: true}
		mw := idempotency.Middleware(st, idempotency.WithStoreTimeout(20*time.Millisecond))(&counter{})
		wantProblem(t, post(mw, "k", `{}`), http.StatusServiceUnavailable, idempotency.ProblemCommitFailed)
		st.mu.Lock()
		defer st.mu.Unlock()
		if len(st.rollbackCtxErr) != 1 || st.rollbackCtxErr[0] != nil {
			t.Fatalf("Rollback context errors = %v, want one call with a live context", st.rollbackCtxErr)
		}
		if st.open != 0 {
			t.Fatalf("%d transactions left open", st.open)
		}
	})
	t.Run("a panic in Commit still rolls back", func(t *testing.T) {
		st := &fakeTxStore{Store: newStore(t), panicCommit: true}
		mw := idempotency.Middleware(st)(&counter{})
		func() {
			defer func() {
				if p := recover(); p != "driver bug" {
					t.Errorf("recovered %v, want the store's panic to go on", p)
				}
			}()
			post(mw, "k", `{}`)
		}()
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.open != 0 {
			t.Fatalf("%d transactions left open after a panic in Commit", st.open)
		}
	})
	t.Run("failed commit keeps the headers set before the middleware", func(t *testing.T) {
		st := &fakeTxStore{Store: newStore(t), commitErr: errors.New("connection lost")}
		_, h := ledgerApp(t, func(int) int { return 0 })
		mw := idempotency.Middleware(st)(h)
		outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-Id", "req-7") // an outer middleware's header
			w.Header().Set("Vary", "Origin")
			mw.ServeHTTP(w, r)
		})
		w := post(outer, "k", `{}`)
		wantProblem(t, w, http.StatusServiceUnavailable, idempotency.ProblemCommitFailed)
		if w.Header().Get("X-Request-Id") != "req-7" || w.Header().Get("Vary") != "Origin" {
			t.Fatalf("outer middleware's headers lost: %v", w.Header())
		}
		if w.Header().Get("Set-Cookie") != "" || w.Header().Get("Location") != "" {
			t.Fatalf("the handler's headers leaked into the problem: %v", w.Header())
		}
	})
}

// TestTxClaimPanicRollsBack checks that a transaction whose Claim panics is
// rolled back before the panic goes on, as one whose Commit panics is:
// neither the transaction nor its connection outlives the request.
func TestTxClaimPanicRollsBack(t *testing.T) {
	st := &fakeTxStore{Store: newStore(t), panicClaim: true}
	mw := idempotency.Middleware(st)(&counter{})
	p := postPanicking(mw)
	if p != "driver bug in claim" {
		t.Fatalf("the request went on with panic %v, want the Claim's", p)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.begun != 1 || st.open != 0 {
		t.Fatalf("%d transactions begun, %d left open; want 1 begun, none open", st.begun, st.open)
	}
}

// TestTxClaimPanicKeepsItsPanic checks that a transaction whose Claim
// panics, and whose Rollback panics too (a driver with a bug in both),
// goes on with the Claim's panic, as it did before the Middleware rolled
// such a transaction back: the rollback's own panic must not replace the
// one that tells what broke first. The request still gives its one event.
func TestTxClaimPanicKeepsItsPanic(t *testing.T) {
	st := &fakeTxStore{Store: newStore(t), panicClaim: true, panicRollback: true}
	var ev events
	mw := idempotency.Middleware(st, idempotency.WithHook(ev.hook))(&counter{})
	p := postPanicking(mw)
	if p != "driver bug in claim" {
		t.Fatalf("the request went on with panic %v, want the Claim's", p)
	}
	if got := ev.outcomes(); len(got) != 1 || got[0] != idempotency.OutcomeStoreError {
		t.Fatalf("events %v, want one %s", got, idempotency.OutcomeStoreError)
	}
}

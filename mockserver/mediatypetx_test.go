package mockserver_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// TestPaymentMediaTypeTxRetryInProgress: in transactional mode, a retry
// with a refused media type of a payment whose transaction is still
// running (its claim a row not yet committed, which Store.Get does not
// see) is answered 409 in progress with Retry-After, as the Middleware
// answers a retry then; it was answered 415, "neither run nor stored",
// for a key that was paying. Nothing of it runs: after the commit, its
// retry gets the first 201 replayed, and the key paid once.
func TestPaymentMediaTypeTxRetryInProgress(t *testing.T) {
	st, led := txStoreLedger(t, "mock_mediatype_tx_", 200*time.Millisecond)
	srv, release, first := startHeldTxPayment(t, st, led, "tx-running")
	h := http.Header{"Idempotency-Key": {"tx-running"}, "Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	resp, b := sendHeaders(t, srv, h, payBody)
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Retry-After") == "" {
		t.Errorf("refused retry while the first transaction runs: %d (Retry-After %q) %s; want 409 with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), b)
	} else {
		wantProblem(t, resp, b, http.StatusConflict, idempotency.ProblemInProgress)
	}
	close(release)
	firstBody := <-first
	if resp, b := sendHeaders(t, srv, h, payBody); resp.StatusCode != http.StatusCreated || resp.Header.Get(idempotency.HeaderReplayed) != "true" || string(b) != string(firstBody) {
		t.Errorf("refused retry after the commit: %d (%s %q) %s; want the first 201 replayed: %s",
			resp.StatusCode, idempotency.HeaderReplayed, resp.Header.Get(idempotency.HeaderReplayed), b, firstBody)
	}
	if n := srv.Executions("tx-running"); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
	if n := len(srv.Payments()); n != 1 {
		t.Errorf("%d payments, want 1", n)
	}
}

// txStoreLedger returns a pgstore TxStore whose claims wait up to
// lockTimeout for a concurrent transaction's claim, and a pgledger, over
// a table of their own named from prefix, which the test drops.
func txStoreLedger(t *testing.T, prefix string, lockTimeout time.Duration) (*pgstore.TxStore, *pgledger.Ledger) {
	t.Helper()
	pool := testenv.PostgresPool(t)
	table := testenv.PostgresTable(t, pool, prefix)
	st := pgstore.NewTx(pool, pgstore.WithTable(table), pgstore.WithLockTimeout(lockTimeout))
	led := pgledger.New(pool, table, nil)
	t.Cleanup(func() {
		_ = st.Close()
		if err := led.DropSchema(context.Background()); err != nil {
			t.Errorf("DropSchema: %v", err)
		}
	})
	for _, create := range []func(context.Context) error{st.CreateSchema, led.CreateSchema} {
		if err := create(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return st, led
}

// startHeldTxPayment starts a server in transactional mode over st and
// led, and a payment under key whose handler it holds, its transaction
// open, until release is closed; first then gets the payment's 201 body.
// opts are the server's further options. The server closes when the test
// ends.
func startHeldTxPayment(t *testing.T, st idempotency.TxStore, led mockserver.Ledger, key string, opts ...mockserver.Option) (srv *mockserver.Server, release chan<- struct{}, first <-chan []byte) {
	t.Helper()
	entered, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv = mockserver.New(append([]mockserver.Option{mockserver.WithStore(st), mockserver.WithLedger(led), mockserver.WithHandlerMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(entered); <-held })
			next.ServeHTTP(w, r)
		})
	})}, opts...)...)
	t.Cleanup(srv.Close)
	if !srv.Transactional() {
		t.Fatal("not in transactional mode")
	}
	body := make(chan []byte, 1)
	go func() {
		_, resp, b := sendTyped(t, srv, key, []string{"application/json"}, payBody)
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("first attempt: %d %s, want 201", resp.StatusCode, b)
		}
		body <- b
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		close(held)
		t.Fatal("the first attempt never reached the handler")
	}
	return srv, held, body
}

// waitCountingTxStore is a TxStore whose transactions count in waits the
// claims answered in progress: in transactional mode, each is a wait for
// another transaction's claim, up to the store's lock timeout.
type waitCountingTxStore struct {
	*pgstore.TxStore
	waits *atomic.Int32
}

func (s waitCountingTxStore) BeginTx(ctx context.Context) (idempotency.Tx, error) {
	tx, err := s.TxStore.BeginTx(ctx)
	if err != nil {
		return nil, err
	}
	return waitCountingTx{tx, s.waits}, nil
}

type waitCountingTx struct {
	idempotency.Tx
	waits *atomic.Int32
}

func (t waitCountingTx) Claim(ctx context.Context, k idempotency.Key, fp string, ttl time.Duration) (idempotency.ClaimResult, error) {
	res, err := t.Tx.Claim(ctx, k, fp, ttl)
	if err == nil && !res.Acquired && res.Entry.State == idempotency.StateInProgress {
		t.waits.Add(1)
	}
	return res, err
}

// TestPaymentMediaTypeTxRetryInProgressWaitsOnce: in transactional mode, a
// retry with a refused media type of a payment whose transaction is still
// running waits for it once, up to the store's lock timeout, before it is
// answered 409 with Retry-After: it waited twice, once as requireJSON
// looked the key up and once more as the idempotency Middleware claimed
// it, and was answered after twice the lock timeout.
func TestPaymentMediaTypeTxRetryInProgressWaitsOnce(t *testing.T) {
	const lockTimeout = time.Second
	st, led := txStoreLedger(t, "mock_mediatype_txwait_", lockTimeout)
	waits := new(atomic.Int32)
	srv, release, first := startHeldTxPayment(t, waitCountingTxStore{st, waits}, led, "tx-waits")
	h := http.Header{"Idempotency-Key": {"tx-waits"}, "Content-Type": {"text/plain"}}
	began := time.Now()
	resp, b := sendHeaders(t, srv, h, payBody)
	took := time.Since(began)
	close(release)
	<-first
	if resp.StatusCode != http.StatusConflict || resp.Header.Get("Retry-After") == "" {
		t.Errorf("refused retry while the first transaction runs: %d (Retry-After %q) %s; want 409 with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if n := waits.Load(); n != 1 {
		t.Errorf("the refused retry waited %d times for the running transaction, want once", n)
	}
	if took >= 2*lockTimeout {
		t.Errorf("the refused retry was answered after %v, twice the lock timeout (%v) or more", took, lockTimeout)
	}
}

// TestPaymentMediaTypeTxRetryWaitsForResult: in transactional mode, under
// idempotency.WithWaitForResult, a retry with a refused media type of a
// payment whose transaction runs waits for it in the idempotency
// Middleware, as any retry, looking the key up again as it waits, and
// gets the payment's 201, replayed, once it commits; nothing of it runs.
func TestPaymentMediaTypeTxRetryWaitsForResult(t *testing.T) {
	st, led := txStoreLedger(t, "mock_mediatype_txwaiter_", 200*time.Millisecond)
	srv, release, first := startHeldTxPayment(t, st, led, "tx-waiter", mockserver.WithIdempotencyOptions(idempotency.WithWaitForResult(10*time.Second)))
	h := http.Header{"Idempotency-Key": {"tx-waiter"}, "Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	type answer struct {
		resp *http.Response
		body []byte
	}
	waiter := make(chan answer, 1)
	go func() {
		resp, b := sendHeaders(t, srv, h, payBody)
		waiter <- answer{resp, b}
	}()
	select {
	case got := <-waiter:
		t.Errorf("refused retry of a payment in progress answered without waiting: %d %s", got.resp.StatusCode, got.body)
	case <-time.After(500 * time.Millisecond): // past the lookup's lock wait (200 ms), waiting in the Middleware
	}
	close(release)
	firstBody := <-first
	got := <-waiter
	if got.resp.StatusCode != http.StatusCreated || got.resp.Header.Get(idempotency.HeaderReplayed) != "true" || string(got.body) != string(firstBody) {
		t.Errorf("refused retry that waited for the payment: %d (%s %q) %s; want its 201 replayed: %s",
			got.resp.StatusCode, idempotency.HeaderReplayed, got.resp.Header.Get(idempotency.HeaderReplayed), got.body, firstBody)
	}
	if n := srv.Executions("tx-waiter"); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
}

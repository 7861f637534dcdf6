package mockserver_test

import (
	"context"
	"net/http"
	"sync"
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
	pool := testenv.PostgresPool(t)
	table := testenv.PostgresTable(t, pool, "mock_mediatype_tx_")
	st := pgstore.NewTx(pool, pgstore.WithTable(table), pgstore.WithLockTimeout(200*time.Millisecond))
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
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	srv := mockserver.New(mockserver.WithStore(st), mockserver.WithLedger(led), mockserver.WithHandlerMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(entered); <-release })
			next.ServeHTTP(w, r)
		})
	}))
	defer srv.Close()
	if !srv.Transactional() {
		t.Fatal("not in transactional mode")
	}
	first := make(chan []byte, 1)
	go func() {
		_, resp, b := sendTyped(t, srv, "tx-running", []string{"application/json"}, payBody)
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("first attempt: %d %s, want 201", resp.StatusCode, b)
		}
		first <- b
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the first attempt never reached the handler")
	}
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

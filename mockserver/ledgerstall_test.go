package mockserver_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// TestLedgerStallAnswers503: the endpoints that read or reset the ledger (the
// admin API's and the payments API's reads) answer a 503
// ProblemLedgerUnavailable problem within a bound while the ledger's
// PostgreSQL does not answer (a partition, a failover behind an address
// that still accepts connections). POST /_mock/reset, detached from the
// request so that a client going away does not cut it short, waited for
// ever, and the reads as long as the client did: a tester's reset between
// two scenarios, or a client without a timeout, hung instead of failing.
func TestLedgerStallAnswers503(t *testing.T) {
	const ledgerTimeout = 300 * time.Millisecond
	const bound = 3 * time.Second
	direct := testenv.PostgresPool(t)
	if err := direct.Ping(context.Background()); err != nil {
		testenv.Unavailable(t, "postgres: "+err.Error())
	}
	table := testenv.RandomName("mockserver_stall_")
	schema := pgledger.New(direct, table, nil)
	if err := schema.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := schema.DropSchema(ctx); err != nil {
			t.Errorf("DropSchema: %v", err)
		}
	})
	pool, proxy := testenv.ProxiedPostgresPool(t)
	srv := mockserver.New(mockserver.WithLedger(pgledger.New(pool, table, nil)),
		mockserver.WithLedgerTimeout(ledgerTimeout))
	defer srv.Close()
	if resp, b := mustSend(t, srv, "POST", "/payments", "k1", payBody); resp.StatusCode != http.StatusCreated {
		t.Fatalf("payment: %d %s", resp.StatusCode, b)
	}

	proxy.SetStall(true)
	defer proxy.SetStall(false)
	client := srv.Client()
	client.Timeout = bound
	for _, tc := range []struct{ method, path string }{
		{"POST", "/_mock/reset"},
		{"GET", "/_mock/keys"},
		{"GET", "/_mock/keys/k1"},
		{"GET", "/payments"},
		{"GET", "/payments/pay_0000000000000000"},
		{"GET", "/balance"},
		{"GET", "/balance?currency=EUR"},
	} {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s %s with the ledger stalled: no answer after %v: %v", tc.method, tc.path,
				time.Since(start).Round(10*time.Millisecond), err)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s %s with the ledger stalled = %d %s; want 503", tc.method, tc.path, resp.StatusCode, b)
			continue
		}
		wantProblem(t, resp, b, http.StatusServiceUnavailable, mockserver.ProblemLedgerUnavailable)
	}
}

package mockserver_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// switchLedger is a memory ledger whose readers and Reset fail while down
// is set, as a shared ledger does while its Redis or PostgreSQL is away.
type switchLedger struct {
	mockserver.Ledger
	down atomic.Bool
}

func (l *switchLedger) Payments(ctx context.Context) ([]mockserver.Payment, error) {
	if l.down.Load() {
		return nil, errLedgerDown
	}
	return l.Ledger.Payments(ctx)
}

func (l *switchLedger) Reset(ctx context.Context) error {
	if l.down.Load() {
		return errLedgerDown
	}
	return l.Ledger.Reset(ctx)
}

// TestAdminLedgerDown: the admin answers that read or reset the ledger must
// not pass a ledger that failed off as a success. /_mock/keys answering
// "payments": 0 for a key that paid reads as a lost payment, and a 200 from
// /_mock/reset that left the payments in place makes the next scenario
// count them as doubles: both are 503 ProblemLedgerUnavailable problems,
// as the payments API's reads are.
func TestAdminLedgerDown(t *testing.T) {
	led := &switchLedger{Ledger: mockserver.NewMemoryLedger(nil)}
	srv := mockserver.New(mockserver.WithLedger(led))
	defer srv.Close()
	if resp, b := mustSend(t, srv, "POST", "/payments", "k1", payBody); resp.StatusCode != http.StatusCreated {
		t.Fatalf("payment: %d %s", resp.StatusCode, b)
	}
	led.down.Store(true)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/_mock/keys/k1"},
		{"GET", "/_mock/keys"},
		{"POST", "/_mock/reset"},
	} {
		resp, b := mustSend(t, srv, tc.method, tc.path, "", "")
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s %s with the ledger down = %d %s; want 503", tc.method, tc.path, resp.StatusCode, b)
			continue
		}
		wantProblem(t, resp, b, http.StatusServiceUnavailable, mockserver.ProblemLedgerUnavailable)
	}
	led.down.Store(false)
	if ps := srv.Payments(); len(ps) != 1 {
		t.Fatalf("%d payments once the ledger is back, want the one made", len(ps))
	}
	if resp, b := mustSend(t, srv, "POST", "/_mock/reset", "", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("reset with the ledger up = %d %s", resp.StatusCode, b)
	}
	if ps := srv.Payments(); len(ps) != 0 {
		t.Fatalf("%d payments after a reset that answered 200", len(ps))
	}
}

package mockserver_test

import (
	"context"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/mockserver"
)

// keepLedger is a memory Ledger that records the keep of every Pay.
type keepLedger struct {
	mockserver.Ledger
	mu    sync.Mutex
	keeps []time.Duration
}

func (l *keepLedger) Pay(ctx context.Context, ref string, keep time.Duration, p mockserver.Payment) (mockserver.Payment, bool, error) {
	l.mu.Lock()
	l.keeps = append(l.keeps, keep)
	l.mu.Unlock()
	return l.Ledger.Pay(ctx, ref, keep, p)
}

// TestLedgerKeepIsTheTTLExactly: the keep a Server passes to Ledger.Pay is
// the idempotency TTL it was given, to the nanosecond, also where a float
// number of seconds cannot hold it: past 2^53 ns (about 104 days) a float
// loses nanoseconds, and math.MaxInt64 ("forever") rounds up to 2^63,
// which overflowed to a negative keep.
func TestLedgerKeepIsTheTTLExactly(t *testing.T) {
	for _, ttl := range []time.Duration{
		1500*time.Millisecond + 1,
		idempotency.DefaultTTL,
		365*24*time.Hour + 1,
		1<<53 + 1,
		math.MaxInt64 - time.Second,
		math.MaxInt64,
	} {
		led := &keepLedger{Ledger: mockserver.NewMemoryLedger(nil)}
		srv := mockserver.New(mockserver.WithLedger(led), mockserver.WithIdempotencyOptions(idempotency.WithTTL(ttl)))
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"amount":10,"currency":"EUR","recipient":"a"}`))
		req.Header.Set("Idempotency-Key", "keep-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != http.StatusCreated || len(led.keeps) != 1 || led.keeps[0] != ttl {
			t.Errorf("TTL %d ns: payment %d, keeps %d, want 201 and one Pay with keep %d", int64(ttl), resp.StatusCode, led.keeps, int64(ttl))
		}
	}
}

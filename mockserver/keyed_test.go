package mockserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
)

// dying stands for an instance that dies right after its payment: its
// renewals stop reaching the store and its Complete never lands, so the
// claim stays in progress until the lease lapses (the stale-token answer
// stands for the takeover that a dead instance never hears of).
type dying struct{ idempotency.Store }

func (dying) Renew(context.Context, idempotency.Key, int64, time.Duration) error { return nil }
func (dying) Complete(context.Context, idempotency.Key, int64, idempotency.Response, time.Duration) error {
	return idempotency.ErrStaleToken
}

// TestRerunAfterTakeover runs a payment on instance A, which dies before
// recording its outcome; after the lease, instance B takes the key over and
// runs the handler again. Keyed by the derived key (the default), B's run
// finds A's payment and answers with it: one payment, debited once. With
// WithUnkeyedPayments, B pays a second time: what a lease alone cannot
// prevent.
func TestRerunAfterTakeover(t *testing.T) {
	for _, tt := range []struct {
		name     string
		opts     []mockserver.Option
		payments int
	}{
		{"keyed", nil, 1},
		{"unkeyed", []mockserver.Option{mockserver.WithUnkeyedPayments()}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := memstore.New()
			defer st.Close()
			ledger := mockserver.NewMemoryLedger(nil)
			lease := mockserver.WithIdempotencyOptions(idempotency.WithLease(80 * time.Millisecond))
			a := mockserver.New(append([]mockserver.Option{mockserver.WithStore(dying{st}), mockserver.WithLedger(ledger), lease}, tt.opts...)...)
			defer a.Close()
			b := mockserver.New(append([]mockserver.Option{mockserver.WithStore(st), mockserver.WithLedger(ledger), lease}, tt.opts...)...)
			defer b.Close()

			// A's client gets 409 (A's outcome was not stored, so it is not
			// an answer any repeat would give); A's payment is in the ledger.
			resp, body := mustSend(t, a, "POST", "/payments", "rerun-1", payBody)
			if resp.StatusCode != http.StatusConflict {
				t.Fatalf("A: %d %s, want 409", resp.StatusCode, body)
			}
			paid := a.Payments()
			if len(paid) != 1 {
				t.Fatalf("after A the ledger holds %d payments, want 1", len(paid))
			}
			first := paid[0]
			var second mockserver.Payment
			testenv.Eventually(t, "B takes the key over", func() bool {
				resp, body := mustSend(t, b, "POST", "/payments", "rerun-1", payBody)
				if resp.StatusCode == http.StatusCreated {
					second = decodeJSON[mockserver.Payment](t, body)
					return true
				}
				return false
			})
			if b.Executions("rerun-1") != 1 {
				t.Fatalf("B ran the handler %d times, want 1 (the takeover)", b.Executions("rerun-1"))
			}
			if got := b.Stats("rerun-1").Payments; got != tt.payments {
				t.Fatalf("the ledger holds %d payments for the key, want %d", got, tt.payments)
			}
			if keyed := tt.payments == 1; keyed != (second.ID == first.ID) {
				t.Fatalf("A paid %s, B answered %s", first.ID, second.ID)
			}
			if want := mockserver.DefaultBalance - int64(tt.payments)*first.Amount; b.Balance("EUR") != want {
				t.Fatalf("EUR balance %d, want %d", b.Balance("EUR"), want)
			}
			if first.Ref == "" || (tt.payments == 1) != (first.Ref == second.Ref) {
				t.Fatalf("refs %q and %q", first.Ref, second.Ref)
			}
		})
	}
}

// TestPaymentWork checks that WithPaymentWork holds the answer after the
// payment is recorded: a duplicate arriving meanwhile meets 409, and the
// payment is already in the ledger.
func TestPaymentWork(t *testing.T) {
	srv := mockserver.New(mockserver.WithPaymentWork(300 * time.Millisecond))
	defer srv.Close()
	begin := time.Now()
	done := make(chan int, 1)
	go func() {
		resp, _ := mustSend(t, srv, "POST", "/payments", "work-1", payBody)
		done <- resp.StatusCode
	}()
	testenv.Eventually(t, "the payment is recorded", func() bool { return srv.Stats("work-1").Payments == 1 })
	if resp, _ := mustSend(t, srv, "POST", "/payments", "work-1", payBody); resp.StatusCode != http.StatusConflict {
		t.Errorf("duplicate during the work: %d, want 409", resp.StatusCode)
	}
	if code := <-done; code != http.StatusCreated {
		t.Fatalf("payment answered %d", code)
	}
	if took := time.Since(begin); took < 300*time.Millisecond {
		t.Fatalf("answered after %v, before the work was done", took)
	}
}

// keepSpy is a memory ledger that records the keep of every Pay.
type keepSpy struct {
	mockserver.Ledger
	keeps chan time.Duration
}

func (l keepSpy) Pay(ctx context.Context, ref string, keep time.Duration, p mockserver.Payment) (mockserver.Payment, bool, error) {
	l.keeps <- keep
	return l.Ledger.Pay(ctx, ref, keep, p)
}

// TestPayKeepsRefForTTL checks that the Server hands its ledger its
// idempotency TTL as the keep of a payment's ref: the ledger must let go of
// the ref when the key's record expires, so that the key executes anew.
func TestPayKeepsRefForTTL(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []mockserver.Option
		want time.Duration
	}{
		{"default", nil, idempotency.DefaultTTL},
		{"WithTTL", []mockserver.Option{mockserver.WithIdempotencyOptions(idempotency.WithTTL(1500 * time.Millisecond))}, 1500 * time.Millisecond},
		{"last WithTTL wins", []mockserver.Option{
			mockserver.WithIdempotencyOptions(idempotency.WithTTL(time.Minute)),
			mockserver.WithIdempotencyOptions(idempotency.WithTTL(3 * time.Hour)),
		}, 3 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spy := keepSpy{mockserver.NewMemoryLedger(nil), make(chan time.Duration, 1)}
			srv := mockserver.New(append(tt.opts, mockserver.WithLedger(spy))...)
			defer srv.Close()
			if resp, body := mustSend(t, srv, "POST", "/payments", "keep-1", payBody); resp.StatusCode != http.StatusCreated {
				t.Fatalf("POST /payments: %d %s", resp.StatusCode, body)
			}
			if got := <-spy.keeps; got != tt.want {
				t.Errorf("the ledger was asked to keep the ref %v, want %v (the TTL)", got, tt.want)
			}
		})
	}
}

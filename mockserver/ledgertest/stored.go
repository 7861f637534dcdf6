package ledgertest

import (
	"testing"
	"time"

	"github.com/saferetry/saferetry/mockserver"
)

// The checks below hold for a ledger that keeps its records in a store
// shared by processes (pgledger, redisledger), not for the one in a
// Server's memory, which keeps what it is given and trusts the Server for
// unique IDs. Each takes a fresh ledger with no opening balances.

// CreatedAsStored checks that l answers a payment as it stored it: Pay, on
// the first execution and on the replay, and Payment give Created in UTC
// to the millisecond, whatever zone and precision it came with, so that
// the first execution and every replay answer alike.
func CreatedAsStored(t *testing.T, l mockserver.Ledger) {
	t.Helper()
	ctx := ctxT(t)
	p := payment(1, "EUR", "k")
	p.Created = time.Date(2026, 12, 1, 11, 0, 0, 123_456_789, time.FixedZone("CET", 3600))
	want := time.Date(2026, 12, 1, 10, 0, 0, 123_000_000, time.UTC)
	first, _, err := l.Pay(ctx, "ref", 0, p)
	if err != nil {
		t.Fatal(err)
	}
	again, found, err := l.Pay(ctx, "ref", 0, p)
	if err != nil || !found {
		t.Fatalf("second Pay = found %v, %v", found, err)
	}
	listed, ok, err := l.Payment(ctx, p.ID)
	if err != nil || !ok {
		t.Fatalf("Payment = %v, %v", ok, err)
	}
	for _, got := range []mockserver.Payment{first, again, listed} {
		if !got.Created.Equal(want) || got.Created.Location() != time.UTC {
			t.Errorf("Created = %v, want %v", got.Created, want)
		}
	}
}

// TakenIDRefused pays with l two payments of one ID under different refs
// and checks that the second is refused and changes nothing, and that l
// pays again after the refusal. It returns the refusal, for the caller to
// check its kind.
func TakenIDRefused(t *testing.T, l mockserver.Ledger) error {
	t.Helper()
	ctx := ctxT(t)
	p := payment(5, "EUR", "k-1")
	if _, _, err := l.Pay(ctx, "ref-1", 0, p); err != nil {
		t.Fatal(err)
	}
	same := payment(7, "EUR", "k-2")
	same.ID = p.ID
	_, _, refused := l.Pay(ctx, "ref-2", 0, same)
	if refused == nil {
		t.Error("Pay with a taken ID succeeded")
	}
	if b, err := l.Balance(ctx, "EUR"); err != nil || b != mockserver.DefaultBalance-5 {
		t.Errorf("Balance(EUR) = %d, %v; want %d", b, err, mockserver.DefaultBalance-5)
	}
	if ps, err := l.Payments(ctx); err != nil || len(ps) != 1 {
		t.Errorf("Payments = %d, %v; want 1", len(ps), err)
	}
	// A refusal leaves the ledger working (a connection back in its pool
	// clean).
	if _, _, err := l.Pay(ctx, "ref-3", 0, payment(1, "EUR", "k-3")); err != nil {
		t.Errorf("Pay after the refused one: %v", err)
	}
	return refused
}

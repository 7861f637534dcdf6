package mockserver

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestMemoryLedgerKeepsPaymentsAsGiven: the memory ledger, which keeps
// payments as bytes and records, gives each back equal (==) to the one
// paid: its strings whatever they hold, and its Created whether a plain
// UTC time or one that Unix nanoseconds cannot carry (a monotonic reading,
// another location, a year out of range).
func TestMemoryLedgerKeepsPaymentsAsGiven(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	berlin := time.FixedZone("CET", 3600)
	created := []time.Time{
		base,
		time.Now(), // with a monotonic reading
		base.In(berlin),
		time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
		{},
	}
	l := newMemLedger(map[string]int64{"EUR": 1 << 40})
	var paid []Payment
	for i, c := range created {
		p := Payment{ID: "pay_" + strings.Repeat("x", i), Amount: int64(i + 1), Currency: "EUR",
			Recipient: []string{"acct_1", "", "ünï", strings.Repeat("r", 70000), "a\x00b"}[i],
			Status:    "succeeded", IdempotencyKey: "key-" + strings.Repeat("k", i), Created: c}
		got, found, err := l.Pay(ctx, "ref-"+strings.Repeat("f", i), 0, p)
		p.Ref = "ref-" + strings.Repeat("f", i)
		if err != nil || found || got != p {
			t.Fatalf("Pay %d = %+v, %v, %v; want %+v, new", i, got, found, err, p)
		}
		paid = append(paid, p)
	}
	ps, _ := l.Payments(ctx)
	if len(ps) != len(paid) {
		t.Fatalf("%d payments, want %d", len(ps), len(paid))
	}
	for i := range paid {
		if ps[i] != paid[i] {
			t.Errorf("payment %d = %+v, want %+v", i, ps[i], paid[i])
		}
		if got, ok, _ := l.Payment(ctx, paid[i].ID); !ok || got != paid[i] {
			t.Errorf("Payment(%q) = %+v, %v", paid[i].ID, got, ok)
		}
		// The same ref finds the payment (keep <= 0: whenever made).
		if got, found, _ := l.Pay(ctx, paid[i].Ref, 0, Payment{Amount: 1, Currency: "EUR", Created: base}); !found || got != paid[i] {
			t.Errorf("Pay again under %q = %+v, %v; want the payment found", paid[i].Ref, got, found)
		}
	}
}

// TestStrIndexSharedHash: strings that share a hash are each found at
// their own position, and each moves apart from the other.
func TestStrIndexSharedHash(t *testing.T) {
	held := map[int32]string{0: "a", 1: "b", 2: "b", 3: "a", 4: "c"}
	holds := func(i int32, s string) bool { return held[i] == s }
	var x strIndex
	const h = 7 // every string's hash
	if _, ok, free := x.get(h, "a", holds); ok || !free {
		t.Errorf("get(a) of an empty index = %v, free %v; want false, free", ok, free)
	}
	x.set(h, "a", 0, holds, true)
	if _, ok, free := x.get(h, "b", holds); ok || free {
		t.Errorf("get(b), its hash a's = %v, free %v; want false, not free", ok, free)
	}
	x.set(h, "b", 1, holds, false)
	want := map[string]int32{"a": 0, "b": 1}
	check := func() {
		t.Helper()
		for s, w := range want {
			if i, ok, _ := x.get(h, s, holds); !ok || i != w {
				t.Errorf("get(%s) = %d, %v; want %d", s, i, ok, w)
			}
		}
		if _, ok, _ := x.get(h, "c", holds); ok {
			t.Error("get(c) found a string never set")
		}
	}
	check()
	x.set(h, "b", 2, holds, false)
	want["b"] = 2
	check()
	x.set(h, "a", 3, holds, false)
	want["a"] = 3
	check()
}

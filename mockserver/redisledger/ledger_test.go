package redisledger_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/redisledger"
)

func payment(id string, amount int64, currency string) mockserver.Payment {
	return mockserver.Payment{
		ID: id, Amount: amount, Currency: currency, Recipient: "r", Status: "succeeded",
		IdempotencyKey: "k-" + id, Created: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
	}
}

func TestNewPanics(t *testing.T) {
	// New does not connect: a client of an address nobody serves will do.
	idle := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer idle.Close()
	for _, tc := range []struct {
		name   string
		call   func()
		substr string
	}{
		{"nil client", func() { redisledger.New(nil, "p:", nil) }, "nil client"},
		{"open brace", func() { redisledger.New(idle, "p{:", nil) }, "invalid prefix"},
		{"close brace", func() { redisledger.New(idle, "p}:", nil) }, "invalid prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tc.substr) {
					t.Errorf("panic %v, want one mentioning %q", r, tc.substr)
				}
			}()
			tc.call()
		})
	}
}

func TestValidatePrefix(t *testing.T) {
	for prefix, ok := range map[string]bool{
		"": true, "saferetry:mock:ns:": true, "ünï:": true,
		"{": false, "}": false, "a{b}:": false, "ns:{}": false,
	} {
		err := redisledger.ValidatePrefix(prefix)
		if ok != (err == nil) || (err != nil && !errors.Is(err, redisledger.ErrInvalidPrefix)) {
			t.Errorf("ValidatePrefix(%q) = %v, want ok=%v", prefix, err, ok)
		}
	}
}

// The keys a ledger writes all hash to one Redis Cluster slot, which its
// script needs, and all start with the prefix.
func TestKeysInOneSlot(t *testing.T) {
	rdb := newClient(t)
	prefix := newPrefix(t, rdb)
	l := redisledger.New(rdb, prefix, nil)
	ctx := ctxT(t)
	for i, c := range []string{"EUR", "USD"} {
		if _, _, err := l.Pay(ctx, "ref-"+c, 0, payment("pay_"+c, int64(i+1), c)); err != nil {
			t.Fatal(err)
		}
	}
	keys := testenv.RedisKeys(t, rdb, prefix)
	if len(keys) != 4 {
		t.Fatalf("keys under %q = %q, want 4 (refs, payments, ids, balances)", prefix, keys)
	}
	for _, k := range keys {
		if got, want := redisledger.ClusterSlot(k), redisledger.ClusterSlot(keys[0]); got != want {
			t.Errorf("key %q in slot %d, %q in %d", k, got, keys[0], want)
		}
		if !strings.Contains(k, "{"+prefix+"ledger}") {
			t.Errorf("key %q lacks the hash tag {%sledger}", k, prefix)
		}
	}
	if err := l.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if keys := testenv.RedisKeys(t, rdb, prefix); len(keys) != 0 {
		t.Errorf("keys after Reset = %q, want none", keys)
	}
}

// A refused payment in a currency never paid in leaves no key and no
// balance behind: Balances lists only opening balances and paid currencies.
func TestRefusedPaymentLeavesNoTrace(t *testing.T) {
	rdb := newClient(t)
	prefix := newPrefix(t, rdb)
	l := redisledger.New(rdb, prefix, map[string]int64{"EUR": 10})
	ctx := ctxT(t)
	_, _, err := l.Pay(ctx, "ref", 0, payment("pay_1", mockserver.DefaultBalance+1, "GBP"))
	if !errors.Is(err, mockserver.ErrInsufficientFunds) {
		t.Fatalf("Pay over the default balance = %v, want ErrInsufficientFunds", err)
	}
	if keys := testenv.RedisKeys(t, rdb, prefix); len(keys) != 0 {
		t.Errorf("keys after a refused payment = %q, want none", keys)
	}
	bals, err := l.Balances(ctx)
	if err != nil || len(bals) != 1 || bals["EUR"] != 10 {
		t.Errorf("Balances = %v, %v; want only EUR 10", bals, err)
	}
}

// Balances are compared and debited exactly, beyond the 2^53 where Lua's
// numbers (doubles) round.
func TestBalancesExact(t *testing.T) {
	const big = 1<<53 + 1
	rdb := newClient(t)
	prefix := newPrefix(t, rdb)
	l := redisledger.New(rdb, prefix, map[string]int64{"EUR": big - 1, "USD": math.MaxInt64, "JPY": -5})
	ctx := ctxT(t)
	// As doubles, big-1 and big are equal: a rounding comparison would pay.
	if _, _, err := l.Pay(ctx, "eur", 0, payment("pay_eur", big, "EUR")); !errors.Is(err, mockserver.ErrInsufficientFunds) {
		t.Errorf("Pay of %d from %d = %v, want ErrInsufficientFunds", int64(big), int64(big-1), err)
	}
	if _, _, err := l.Pay(ctx, "usd", 0, payment("pay_usd", math.MaxInt64-1, "USD")); err != nil {
		t.Fatal(err)
	}
	if b, err := l.Balance(ctx, "USD"); err != nil || b != 1 {
		t.Errorf("Balance(USD) = %d, %v; want 1", b, err)
	}
	if _, _, err := l.Pay(ctx, "usd-2", 0, payment("pay_usd2", 2, "USD")); !errors.Is(err, mockserver.ErrInsufficientFunds) {
		t.Errorf("Pay of 2 from 1 = %v, want ErrInsufficientFunds", err)
	}
	if _, _, err := l.Pay(ctx, "jpy", 0, payment("pay_jpy", 1, "JPY")); !errors.Is(err, mockserver.ErrInsufficientFunds) {
		t.Errorf("Pay of 1 from -5 = %v, want ErrInsufficientFunds", err)
	}
	bals, err := l.Balances(ctx)
	if err != nil || bals["USD"] != 1 || bals["EUR"] != big-1 || bals["JPY"] != -5 {
		t.Errorf("Balances = %v, %v", bals, err)
	}
}

// Pay answers the payment as stored, Created in UTC to the millisecond, so
// the first execution and every replay answer alike.
func TestCreatedStoredToTheMillisecond(t *testing.T) {
	rdb := newClient(t)
	l := redisledger.New(rdb, newPrefix(t, rdb), nil)
	ctx := ctxT(t)
	p := payment("pay_t", 1, "EUR")
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
	for _, got := range []mockserver.Payment{first, again} {
		if !got.Created.Equal(want) || got.Created.Location() != time.UTC {
			t.Errorf("Created = %v, want %v", got.Created, want)
		}
	}
}

func TestPayRefusesWhatItCannotStore(t *testing.T) {
	rdb := newClient(t)
	prefix := newPrefix(t, rdb)
	l := redisledger.New(rdb, prefix, nil)
	ctx := ctxT(t)
	bad := payment("pay_bad", 1, "EUR")
	bad.Recipient = "caf\xe9"
	for name, tc := range map[string]struct {
		ref string
		p   mockserver.Payment
	}{
		"zero amount":       {"ref-1", payment("pay_0", 0, "EUR")},
		"negative amount":   {"ref-2", payment("pay_neg", -5, "EUR")},
		"invalid recipient": {"ref-3", bad},
		"invalid ref":       {"ref-\xff", payment("pay_ref", 1, "EUR")},
	} {
		if _, _, err := l.Pay(ctx, tc.ref, 0, tc.p); err == nil || !strings.HasPrefix(err.Error(), "redisledger: pay: ") {
			t.Errorf("%s: Pay = %v, want a redisledger: pay: error", name, err)
		}
	}
	if keys := testenv.RedisKeys(t, rdb, prefix); len(keys) != 0 {
		t.Errorf("keys after refused payments = %q, want none", keys)
	}
}

// Two payments with one ID under different refs: the second is refused
// and changes nothing.
func TestPayRefusesATakenID(t *testing.T) {
	rdb := newClient(t)
	l := redisledger.New(rdb, newPrefix(t, rdb), nil)
	ctx := ctxT(t)
	if _, _, err := l.Pay(ctx, "ref-1", 0, payment("pay_same", 5, "EUR")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Pay(ctx, "ref-2", 0, payment("pay_same", 7, "EUR")); err == nil {
		t.Error("Pay with a taken ID succeeded")
	}
	if b, err := l.Balance(ctx, "EUR"); err != nil || b != mockserver.DefaultBalance-5 {
		t.Errorf("Balance(EUR) = %d, %v; want %d", b, err, mockserver.DefaultBalance-5)
	}
	if ps, err := l.Payments(ctx); err != nil || len(ps) != 1 {
		t.Errorf("Payments = %d, %v; want 1", len(ps), err)
	}
}

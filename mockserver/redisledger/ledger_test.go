package redisledger_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/internal/testkit"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/ledgertest"
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
	testkit.WantPanic(t, "nil client", func() { redisledger.New(nil, "p:", nil) })
	testkit.WantPanic(t, "invalid prefix", func() { redisledger.New(idle, "p{:", nil) })
	testkit.WantPanic(t, "invalid prefix", func() { redisledger.New(idle, "p}:", nil) })
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

// Pay answers the payment as stored, Created in UTC to the millisecond.
func TestCreatedStoredToTheMillisecond(t *testing.T) {
	rdb := newClient(t)
	ledgertest.CreatedAsStored(t, redisledger.New(rdb, newPrefix(t, rdb), nil))
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
	ledgertest.TakenIDRefused(t, redisledger.New(rdb, newPrefix(t, rdb), nil))
}

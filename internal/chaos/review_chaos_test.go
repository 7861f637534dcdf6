package chaos

import (
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestJudgeLostWhenAnsweredWithAnotherOperationsPayment: operation a is
// answered with the payment of operation b, and the ledger holds no
// payment under a's key. a's payment is lost, though the ledger holds the
// payment a was answered with (under b's key).
func TestJudgeLostWhenAnsweredWithAnotherOperationsPayment(t *testing.T) {
	a, b := &op{key: "a"}, &op{key: "b"}
	a.outcome("pay_b", 201, nil)
	b.outcome("pay_b", 201, nil)
	payments := []mockserver.Payment{{ID: "pay_b", IdempotencyKey: "b", Amount: 5, Currency: "XAA"}}
	v := judge([]*op{a, b}, payments, 100, map[string]int64{"XAA": 95})
	if v.Lost != 1 || v.Clean() {
		t.Fatalf("judge = %+v, want 1 lost (a was answered with b's payment and the ledger holds none of a's)", v)
	}
}

// TestJudgeBalanceOffInACurrencyWithoutPayments: the ledger reports a
// balance taken down in a currency it lists no payment in; the balance does
// not add up to the opening balance less the payments.
func TestJudgeBalanceOffInACurrencyWithoutPayments(t *testing.T) {
	a := &op{key: "a"}
	a.outcome("pay_a", 201, nil)
	payments := []mockserver.Payment{{ID: "pay_a", IdempotencyKey: "a", Amount: 5, Currency: "XAA"}}
	v := judge([]*op{a}, payments, 100, map[string]int64{"XAA": 95, "XAB": 93})
	if v.BalanceOff != 7 || v.Clean() {
		t.Fatalf("judge = %+v, want BalanceOff 7 (XAB is 93 with no payment in it)", v)
	}
}

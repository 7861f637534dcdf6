package chaos

import (
	"net/http"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestJudgeRefusalIsNotClean: every operation asks for a valid payment
// within a balance that never runs out, so a final 400 or 402 is the
// service failing it, not an answer the run may end on. One operation is
// refused (402) and the ledger holds no payment of it: the payment the
// client asked for never happened. Another is refused (400) though the
// ledger holds its payment: the client was told it failed, and it paid.
// Neither is a double, a payment the client was answered with and the
// ledger lost, or an operation without a final answer; the run is still
// not clean.
func TestJudgeRefusalIsNotClean(t *testing.T) {
	ops := newOps(3, "run")
	ops[0].outcome("pay_0", http.StatusCreated, nil)
	ops[1].outcome("", http.StatusPaymentRequired, nil)
	ops[2].outcome("", http.StatusBadRequest, nil)
	pay := func(id string, o *op) mockserver.Payment {
		return mockserver.Payment{ID: id, IdempotencyKey: o.key, Amount: o.amount, Currency: o.currency, Recipient: o.recipient}
	}
	payments := []mockserver.Payment{pay("pay_0", ops[0]), pay("pay_2", ops[2])}
	balances := map[string]int64{}
	for _, p := range payments {
		balances[p.Currency] = opening - p.Amount // one payment per currency: the ops pay in currencies of their own
	}
	v := judge(ops, payments, opening, balances)
	if v.Clean() {
		t.Fatalf("judge = %+v, clean, for an operation refused with 402 that never paid and one refused with 400 that paid", v)
	}
}

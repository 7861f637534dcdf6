package chaos

import (
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

func TestJudge(t *testing.T) {
	amounts := map[string]int64{"k1": 10, "k2": 20, "k3": 5} // what each operation asked for, in XAA
	mk := func(key string, ids ...string) *op {
		o := &op{key: key, amount: amounts[key], currency: "XAA"}
		for _, id := range ids {
			o.outcome(id, 201, nil)
		}
		return o
	}
	pay := func(id, key string, amount int64) mockserver.Payment {
		return mockserver.Payment{ID: id, IdempotencyKey: key, Amount: amount, Currency: "XAA"}
	}
	bal := func(b int64) map[string]int64 { return map[string]int64{"XAA": b} }
	unresolved := &op{key: "k5"}
	unresolved.outcome("", 503, nil)
	final := &op{key: "k6"}
	final.outcome("", 402, nil)
	ops := []*op{
		mk("k1", "p1"),       // exactly once
		mk("k2", "p2"),       // paid twice
		mk("k3", "p3", "p9"), // answered with two ids, one of them unknown
		mk("k4", "p4"),       // the ledger lost it
		unresolved,
		final, // refused: no operation here asks for more than the balance
	}
	payments := []mockserver.Payment{
		pay("p1", "k1", 10), pay("p2", "k2", 20), pay("p2b", "k2", 20), pay("p3", "k3", 5),
		pay("px", "stranger", 1),
	}
	const opening = 1000
	paid := int64(10 + 20 + 20 + 5 + 1)
	v := judge(ops, payments, opening, bal(opening-paid))
	want := Verdict{Ops: 6, Payments: 5, Doubles: 1, Lost: 2, Unresolved: 1, Refused: 1, Strays: 1}
	if v != want {
		t.Fatalf("judge = %+v, want %+v", v, want)
	}
	if v.Clean() {
		t.Fatal("a verdict with doubles is clean")
	}
	if off := judge(ops, payments, opening, bal(opening-paid+7)).BalanceOff; off != 7 {
		t.Fatalf("BalanceOff = %d, want 7", off)
	}
	amounts["a"] = 3
	clean := judge([]*op{mk("a", "pa")}, []mockserver.Payment{pay("pa", "a", 3)}, 10, bal(7))
	if !clean.Clean() {
		t.Fatalf("clean run judged %+v", clean)
	}
}

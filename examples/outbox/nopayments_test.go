package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestFaultRunRefusesNoPayments: a fault run of 0 payments would print
// "VERDICT: PASS: 0 of 0 payments" and one of -3 "VERDICT: FAIL: 0 of -3
// payments", a failure of exactly-once that never happened; both are
// refused as bad input before anything starts (so neither the database
// nor the nats-server here is reached).
func TestFaultRunRefusesNoPayments(t *testing.T) {
	for _, n := range []int{0, -3} {
		var out bytes.Buffer
		ok, err := faultRun(context.Background(), runConfig{db: "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1",
			payments: n, natsPort: 1, natsBin: "/nonexistent/nats-server"}, &out)
		if ok || err == nil || !strings.Contains(err.Error(), "-payments") || strings.Contains(out.String(), "VERDICT") {
			t.Errorf("faultRun with %d payments = %v, %v, output %q; want an error about -payments and no verdict", n, ok, err, out.String())
		}
	}
}

package chaos

import (
	"strings"
	"testing"
)

// TestCellWithoutAFaultFiredDoesNotPass: a cell whose scenario fired no
// fault (its operations were done before the first kill was due, say)
// ran without faults; its clean ledger says nothing of exactly-once under
// them, and the run must not pass on it.
func TestCellWithoutAFaultFiredDoesNotPass(t *testing.T) {
	for _, sc := range Scenarios {
		r := Result{Cell: Cell{Store: "redis", Mode: "lease", Scenario: sc},
			Verdict: Verdict{Ops: 20, Payments: 20}, Faults: "none"}
		if r.OK() {
			t.Errorf("scenario %s: a clean cell that fired no fault is OK", sc)
		}
		line, ok := Summary([]Result{r})
		if ok || !strings.Contains(line, "FAIL") {
			t.Errorf("scenario %s: Summary = %q, %v for a cell that fired no fault; want a FAIL", sc, line, ok)
		}
	}
	fired := Result{Cell: Cell{Store: "redis", Mode: "lease", Scenario: ScenarioKill},
		Verdict: Verdict{Ops: 20, Payments: 20}, Faults: "kill=1", FaultCount: 1}
	if !fired.OK() {
		t.Error("a clean cell that fired a fault is not OK")
	}
}

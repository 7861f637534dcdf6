package chaos

import "testing"

// TestUnkeyedDoubleWithoutALapseIsNotExcused: the unkeyed handler pays on
// every execution, so it pays twice when a takeover runs it again; a
// takeover needs the holder's lease to lapse, which only a kill, a pause
// or a store fault brings about. Under the mock server's own faults (a
// 503 before anything ran, an answer dropped after its outcome was stored)
// no lease lapses, so a double there is a lease that failed to hold (a
// keeper that did not renew, a claim taken over early): the cell must not
// pass on it, as it would under a scenario that kills.
func TestUnkeyedDoubleWithoutALapseIsNotExcused(t *testing.T) {
	cell := func(sc string) Result {
		return Result{Cell: Cell{Store: "redis", Mode: "lease", Unkeyed: true, Scenario: sc},
			Verdict: Verdict{Ops: 100, Payments: 102, Doubles: 2}, Faults: "503=7 drop=3", FaultCount: 10}
	}
	if r := cell(ScenarioMock); r.OK() {
		t.Errorf("unkeyed cell under %s with %d doubles is OK; no fault of the scenario lets a lease lapse", r.Scenario, r.Doubles)
	}
	for _, sc := range []string{ScenarioKill, ScenarioPause, ScenarioStore, ScenarioAll} {
		if r := cell(sc); !r.OK() {
			t.Errorf("unkeyed cell under %s with %d doubles is not OK; its faults let leases lapse", sc, r.Doubles)
		}
	}
}

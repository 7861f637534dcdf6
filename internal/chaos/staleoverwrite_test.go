package chaos

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
)

// TestJudgeStaleOverwriteIsNotClean fabricates what a stale holder's
// overwrite leaves: instance A paid (pay_a) and was paused past its lease;
// B took the claim over, paid (pay_b, 1.5 s later) and completed, and the
// client was answered with pay_b; A resumed and completed too, over B's
// answer, so that a later replay answered pay_a. The unkeyed handler's
// second payment is a double it is allowed under a pause, but an answer
// that goes back to an older payment than the client was already given is
// no double: the stored answer was overwritten, and the client told pay_b
// is now told pay_a. Neither cell may pass on it. A later answer that names
// a newer payment (the operation ran again after it was answered) is the
// unkeyed handler's double, which a pause allows.
func TestJudgeStaleOverwriteIsNotClean(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	history := func(answers ...string) ([]*op, []mockserver.Payment, map[string]int64) {
		o := newOps(1, "run")[0]
		for _, id := range answers {
			o.outcome(id, http.StatusCreated, nil)
		}
		pay := func(id string, at time.Time) mockserver.Payment {
			return mockserver.Payment{ID: id, IdempotencyKey: o.key, Amount: o.amount, Currency: o.currency,
				Recipient: o.recipient, Created: at}
		}
		payments := []mockserver.Payment{pay("pay_a", t0), pay("pay_b", t0.Add(1500*time.Millisecond))}
		return []*op{o}, payments, map[string]int64{o.currency: opening - 2*o.amount}
	}
	cell := func(unkeyed bool, v Verdict) Result {
		return Result{Cell: Cell{Store: "postgres", Mode: "lease", Unkeyed: unkeyed, Scenario: ScenarioPause},
			Verdict: v, Faults: "pause=1", FaultCount: 1}
	}
	ops, payments, balances := history("pay_b", "pay_a")
	v := judge(ops, payments, opening, balances)
	if v.Overwritten != 1 {
		t.Errorf("judge = %+v, want 1 overwritten", v)
	}
	for _, unkeyed := range []bool{true, false} {
		if r := cell(unkeyed, v); r.OK() {
			t.Errorf("unkeyed=%v: judge = %+v, OK, for a client answered pay_b and then, by a replay, pay_a, the older payment of a stale holder",
				unkeyed, v)
		}
	}
	ops, payments, balances = history("pay_a", "pay_b")
	if r := cell(true, judge(ops, payments, opening, balances)); !r.OK() || r.Overwritten != 0 {
		t.Errorf("judge = %+v, not OK, for an unkeyed operation that ran again after it was answered, under a pause", r.Verdict)
	}
}

// TestJudgeCatchesAStaleHoldersOverwrite runs a short pause cell on
// instances whose store lets a stale holder complete (its Complete ignores
// the fencing token; see testdata/stalewriter): an instance resumed after
// its claim was taken over and completed completes it again, over the
// answer a client was already given. The judge must fail the cell.
func TestJudgeCatchesAStaleHoldersOverwrite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs server processes for about 20 s")
	}
	pgURL := testenv.PostgresURL(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "stalewriter")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/stalewriter").CombinedOutput(); err != nil {
		t.Fatalf("building testdata/stalewriter: %v\n%s", err, out)
	}
	cfg := Config{MockServer: bin, PostgresURL: pgURL, Dir: dir, Ops: 600, MinDuration: 9 * time.Second,
		Workers: 24, Lease: time.Second, Log: testLog{t}}
	r := runCell(context.Background(), cfg, Cell{Store: "postgres", Mode: "lease", Unkeyed: true, Scenario: ScenarioPause}, cfg.Log.(testLog).logf)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	t.Logf("%d operations, %d payments, faults %s: %+v", r.Ops, r.Payments, r.Faults, r.Verdict)
	if r.FaultCount == 0 {
		t.Fatal("no pause fired")
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "mockserver-*.log"))
	overwrites := 0
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		overwrites += strings.Count(string(b), "stalewriter: overwrote")
	}
	if overwrites == 0 {
		t.Fatal("the store overwrote no completed answer: the cell did not put the judge to the test")
	}
	if r.OK() || r.Overwritten == 0 {
		t.Errorf("a cell whose store overwrote %d completed answers with a stale holder's: %+v, OK %v; want some overwritten, not OK",
			overwrites, r.Verdict, r.OK())
	}
}

// testLog sends a cell's progress lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) { l.t.Log(string(p)); return len(p), nil }

func (l testLog) logf(format string, args ...any) { l.t.Logf(format, args...) }

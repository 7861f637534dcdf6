package chaos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
)

// TestJudgeLostWhenAnsweredWithAnotherOperationsPayment: operation a is
// answered with the payment of operation b, and the ledger holds no
// payment under a's key. a's payment is lost, though the ledger holds the
// payment a was answered with (under b's key).
func TestJudgeLostWhenAnsweredWithAnotherOperationsPayment(t *testing.T) {
	a, b := &op{key: "a"}, &op{key: "b", amount: 5, currency: "XAA"}
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
	a := &op{key: "a", amount: 5, currency: "XAA"}
	a.outcome("pay_a", 201, nil)
	payments := []mockserver.Payment{{ID: "pay_a", IdempotencyKey: "a", Amount: 5, Currency: "XAA"}}
	v := judge([]*op{a}, payments, 100, map[string]int64{"XAA": 95, "XAB": 93})
	if v.BalanceOff != 7 || v.Clean() {
		t.Fatalf("judge = %+v, want BalanceOff 7 (XAB is 93 with no payment in it)", v)
	}
}

// TestKillOfACrashedInstanceIsNoFaultAndKeepsTheCrash: an instance that
// ended on its own (it crashed) is picked by the kill fault. Nothing is
// killed, so no kill is counted as fired, and the crash is still reported
// at the end of the cell, not forgotten as if the suite had killed it.
func TestKillOfACrashedInstanceIsNoFaultAndKeepsTheCrash(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "crashed-once")
	// The first run says it is ready and crashes; a restart serves.
	script := `if [ -e "$1" ]; then echo ready; exec sleep 60; fi; : >"$1"; echo ready; sleep 1; exit 3`
	in := &proc{name: "crasher", bin: "/bin/sh", args: []string{"-c", script, "sh", marker},
		ready: func(line string) bool { return line == "ready" }, log: filepath.Join(dir, "crasher.log")}
	c := &cluster{instances: []*proc{in}, busy: make([]sync.Mutex, 1), lease: time.Second, logf: t.Logf}
	defer c.close()
	if err := in.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.cleanups = append(c.cleanups, func() { in.kill() })
	for !in.exited() {
		<-time.After(10 * time.Millisecond)
	}
	c.kill(context.Background())
	if n := c.fired.total(); n != 0 {
		t.Errorf("faults fired = %s, want none: the instance had crashed, nothing was killed", c.fired.String())
	}
	if !in.exited() {
		t.Error("the crash is forgotten: exited() is false after the kill fault picked the crashed instance")
	}
}

// TestMockFaultsFiredCountsOnlyWhatFired: the mock-faults scenario arms
// dropped answers and 503s on an instance that serves no payment request,
// so none of them fires; the faults fired must say so, not count what was
// armed.
func TestMockFaultsFiredCountsOnlyWhatFired(t *testing.T) {
	ms := mockserver.New()
	defer ms.Close()
	target, _ := url.Parse(ms.URL)
	var armed atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, mockserver.AdminPrefix) {
			armed.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	defer front.Close()
	c := &cluster{instances: []*proc{{name: "mockserver-0"}}, addrs: []string{strings.TrimPrefix(front.URL, "http://")},
		busy: make([]sync.Mutex, 1), admin: &http.Client{Timeout: 2 * time.Second}, lease: time.Second, logf: t.Logf}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	faults := c.run(ctx, ScenarioMock)
	// Until a few faults are armed, however slow the machine (a fixed
	// window of 1.5 s could pass with none under load).
	testenv.Eventually(t, "three mock faults armed", func() bool { return armed.Load() >= 3 })
	stop()
	faults.Wait()
	if n := c.fired.total(); n != 0 {
		t.Errorf("faults fired = %s after %d faults armed and no payment request; want none", c.fired.String(), armed.Load())
	}
}

// TestHealGivesUpOnAnInstanceThatCannotStart: an instance that dies at
// every start (its store gone, its port taken) is not waited for until the
// run's context ends: heal returns, and the cell goes on to its verdict.
func TestHealGivesUpOnAnInstanceThatCannotStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := &proc{name: "doomed", bin: "/bin/sh", args: []string{"-c", "exit 1"},
		ready: func(string) bool { return true }, log: filepath.Join(dir, "doomed.log")}
	const patience = 2 * time.Second
	c := &cluster{instances: []*proc{in}, busy: make([]sync.Mutex, 1), lease: time.Second, patience: patience,
		logf: func(string, ...any) {}}
	defer c.close()
	healed := make(chan error, 1)
	go func() { healed <- c.heal(context.Background()) }()
	select {
	case err := <-healed:
		if err == nil || !strings.Contains(err.Error(), "doomed") {
			t.Errorf("heal of an instance that cannot start = %v, want an error naming it", err)
		}
	case <-time.After(patience + 15*time.Second):
		t.Fatalf("heal still restarting an instance that cannot start after %v (patience %v)", patience+15*time.Second, patience)
	}
}

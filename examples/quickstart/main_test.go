package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/mockserver"
)

func TestQuickstartVerdict(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"VERDICT: PASS: 4 payments",
		"go run ./cmd/chaos",                            // the suite that proves the same under real faults
		"dropped_after_commit, 201 replayed",            // the lost answer was replayed
		"503 injected_failure, 503 injected_failure",    // the 503s were retried
		"409 in_progress",                               // the duplicate met 409
		`msg="saferetry: attempt"`, "key=", "attempt=2", // attempts are logged with their key
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "FAIL") {
		t.Errorf("output mentions FAIL:\n%s", s)
	}
}

// postRaw makes one payment without retries and returns its id.
func postRaw(t *testing.T, srv *mockserver.Server, key string, amount int64) string {
	t.Helper()
	body := `{"amount":` + jsonInt(amount) + `,"currency":"EUR","recipient":"x"}`
	req, err := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p mockserver.Payment
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != 201 {
		t.Fatalf("payment: %d %v", resp.StatusCode, err)
	}
	return p.ID
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

// paidOnce starts a mock server, closed at the end of t, and pays 100 on it
// with key; it returns the server, its balance before the payment and the
// payment's id.
func paidOnce(t *testing.T, key string) (srv *mockserver.Server, start int64, id string) {
	t.Helper()
	srv = mockserver.New()
	t.Cleanup(srv.Close)
	start = srv.Balance(currency)
	return srv, start, postRaw(t, srv, key, 100)
}

func TestVerifyCatchesDoubleExecution(t *testing.T) {
	srv, start, id := paidOnce(t, "twice")
	srv.ExpireKeys() // the key is new again: the same payment executes a second time
	postRaw(t, srv, "twice", 100)

	var out bytes.Buffer
	err := verify(srv, []*op{{title: "t", key: "twice", amount: 100, id: id}}, newCounter(), start, &out)
	if err == nil || !strings.Contains(err.Error(), "executed 2 times") {
		t.Errorf("verify = %v, want a double execution reported", err)
	}
	if !strings.Contains(out.String(), "VERDICT: FAIL") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestVerifyCatchesLostPaymentAndWrongBalance(t *testing.T) {
	srv, start, id := paidOnce(t, "kept")

	var out bytes.Buffer
	ops := []*op{{title: "kept", key: "kept", amount: 100, id: id}, {title: "lost", key: "lost", amount: 50, id: "pay_x"}}
	err := verify(srv, ops, newCounter(), start, &out)
	if err == nil || !strings.Contains(err.Error(), "key lost executed 0 times") || !strings.Contains(err.Error(), "balance is") {
		t.Errorf("verify = %v, want the lost payment and the balance reported", err)
	}
}

func TestVerifyPassesOnExactlyOnce(t *testing.T) {
	srv, start, id := paidOnce(t, "once")
	var out bytes.Buffer
	if err := verify(srv, []*op{{title: "once", key: "once", amount: 100, id: id}}, newCounter(), start, &out); err != nil {
		t.Errorf("verify = %v\n%s", err, out.String())
	}
}

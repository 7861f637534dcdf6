package ledgertest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// Pay makes a payment through srv's HTTP API (POST /payments with the
// JSON body and the Idempotency-Key key), for end-to-end checks of a
// ledger shared by several servers, and returns the payment of the 201
// answer; any other answer fails the test.
func Pay(t testing.TB, srv *mockserver.Server, key, body string) mockserver.Payment {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/payments", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p mockserver.Payment
	if err := json.Unmarshal(b, &p); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /payments = %d %s (%v)", resp.StatusCode, b, err)
	}
	return p
}

package redisledger_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/ledgertest"
	"github.com/saferetry/saferetry/mockserver/redisledger"
)

// Two Servers over one Redis, each with clients of its own, act as one
// service: a payment made on one is listed, replayed and debited on the
// other.
func TestServersShareTheLedger(t *testing.T) {
	prefix := newPrefix(t, newClient(t))
	instance := func() *mockserver.Server {
		rdb := newClient(t)
		srv := mockserver.New(
			mockserver.WithStore(redisstore.New(rdb, redisstore.WithPrefix(prefix))),
			mockserver.WithLedger(redisledger.New(rdb, prefix, map[string]int64{"EUR": 5000})),
			mockserver.WithNamespace("e2e"),
		)
		t.Cleanup(srv.Close)
		return srv
	}
	a, b := instance(), instance()

	first := ledgertest.Pay(t, a, "key-1", `{"amount": 1250, "currency": "EUR", "recipient": "alice"}`)
	again := ledgertest.Pay(t, b, "key-1", `{"amount": 1250, "currency": "EUR", "recipient": "alice"}`)
	if again.ID != first.ID {
		t.Errorf("the other instance answered payment %s, want the replay of %s", again.ID, first.ID)
	}
	var list []mockserver.Payment
	get(t, b, "/payments", &list)
	if len(list) != 1 || list[0].ID != first.ID || list[0].Recipient != "alice" {
		t.Errorf("GET /payments on the other instance = %+v, want the one payment %s", list, first.ID)
	}
	var bal struct{ Balances map[string]int64 }
	get(t, b, "/balance", &bal)
	if bal.Balances["EUR"] != 5000-1250 {
		t.Errorf("GET /balance on the other instance = %v, want EUR %d", bal.Balances, 5000-1250)
	}
}

func get(t *testing.T, srv *mockserver.Server, path string, v any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d, %v", path, resp.StatusCode, err)
	}
}

package chaos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestReadLedgerRetriesUnavailable reads the ledger from an instance whose
// first answers are 503, as after a store fault cut its connection to the
// ledger: the read is sent again and succeeds. Any other failure ends the
// read at once.
func TestReadLedgerRetriesUnavailable(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			http.Error(w, "ledger unavailable", http.StatusServiceUnavailable)
			return
		}
		switch r.URL.Path {
		case "/payments":
			_, _ = w.Write([]byte(`[{"id":"pay_1","amount":1500}]`))
		case "/balance":
			_, _ = w.Write([]byte(`{"balances":{"EUR":8500}}`))
		}
	}))
	defer srv.Close()
	payments, balances, err := readLedger(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
	if err != nil || len(payments) != 1 || payments[0].Amount != 1500 || balances["EUR"] != 8500 {
		t.Fatalf("readLedger = %+v, %v, %v; want one payment of 1500 and 8500 EUR", payments, balances, err)
	}
	if n := calls.Load(); n != 5 {
		t.Errorf("%d requests, want 5 (two 503s, then the balances, the payments and the balances again)", n)
	}

	calls.Store(0)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer bad.Close()
	if _, _, err := readLedger(context.Background(), strings.TrimPrefix(bad.URL, "http://")); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("readLedger of a 400 = %v, want its error", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("a 400 was asked %d times, want once", n)
	}
}

func TestHostPortOnlyLoopback(t *testing.T) {
	for _, tt := range []struct {
		url  string
		want string // "" for an error
	}{
		{"postgres://postgres@127.0.0.1:5432/test", "127.0.0.1:5432"},
		{"postgres://postgres@localhost:6543/test", "localhost:6543"},
		{"postgres://postgres@[::1]:5432/test", "[::1]:5432"},
		{"postgres://postgres@db.example.com:5432/test", ""},
		{"postgres://postgres@10.0.0.7/test", ""},
	} {
		got, err := hostPort(tt.url)
		if (err == nil) != (tt.want != "") || got != tt.want {
			t.Errorf("hostPort(%q) = %q, %v; want %q", tt.url, got, err, tt.want)
		}
	}
}

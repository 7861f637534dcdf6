package pgstore_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/replaymix"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// TestMockRefusalsNotCounted: the mock server in transactional mode looks
// up the key of a body it refuses (415) with a claim that it rolls back,
// which claims nothing for a request: the fast paths' counts, which choose
// the statements of the requests' claims from what those claims found,
// leave it out. Counted, two windows of refused requests with keys of their
// own, each probe acquiring, turned on the plain INSERT first
// (InsertsFirst), and as many refused retries of a paid key, each probe
// finding its record (the same body, refused for its
// Content-Encoding), the replay fast path (ReadsFirst), though no request
// had claimed anything.
func TestMockRefusalsNotCounted(t *testing.T) {
	pool := newPool(t)
	table := uniqueTable(t, pool)
	st := pgstore.NewTx(pool, pgstore.WithTable(table))
	led := pgledger.New(pool, table, nil)
	t.Cleanup(func() {
		_ = st.Close()
		if err := led.DropSchema(context.Background()); err != nil {
			t.Errorf("DropSchema: %v", err)
		}
	})
	for _, create := range []func(context.Context) error{st.CreateSchema, led.CreateSchema} {
		if err := create(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	srv := mockserver.New(mockserver.WithStore(st), mockserver.WithLedger(led))
	defer srv.Close()
	if !srv.Transactional() {
		t.Fatal("not in transactional mode")
	}
	// post sends a payment under key, with the header hk set to hv.
	post := func(key, hk, hv string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(`{"amount":1250,"currency":"EUR","recipient":"alice"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(hk, hv)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 2 * replaymix.Window {
		if code := post("free-"+strconv.Itoa(i), "Content-Type", "text/plain"); code != http.StatusUnsupportedMediaType {
			t.Fatalf("refused request of a free key: %d, want 415", code)
		}
	}
	if pgstore.InsertsFirst(st) {
		t.Error("refused requests, which claimed nothing, turned on the plain INSERT first")
	}
	if code := post("paid", "Accept", "application/json"); code != http.StatusCreated {
		t.Fatalf("payment: %d, want 201", code)
	}
	for range 2 * replaymix.Window {
		if code := post("paid", "Content-Encoding", "gzip"); code != http.StatusCreated {
			t.Fatalf("refused retry of a paid key: %d, want its 201 replayed", code)
		}
	}
	if pgstore.ReadsFirst(st.Store) {
		t.Error("refused retries, which claimed nothing, turned on the replay fast path")
	}
}

package conformance_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

// itemServer keeps the contract (the idempotency Middleware): POST /items
// creates an item, GET /items lists the items' ids as list writes them.
func itemServer(t *testing.T, list func(ids []int) []byte) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	var ids []int
	mw := idempotency.Middleware(memstore.New(), idempotency.WithKeyRequired(true))
	mux := http.NewServeMux()
	mux.Handle("POST /items", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond) // so that the burst finds it in progress
		mu.Lock()
		id := len(ids) + 1
		ids = append(ids, id)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/items/"+strconv.Itoa(id))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":` + strconv.Itoa(id) + `}`))
	})))
	mux.HandleFunc("GET /items", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		out := list(append([]int(nil), ids...))
		mu.Unlock()
		_, _ = w.Write(out)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// wrappedList writes {"items":[{"id":1},...]}, as many APIs wrap their
// lists: its size grows by 8 bytes for the first item and by 9 for the
// next.
func wrappedList(ids []int) []byte {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = `{"id":` + strconv.Itoa(id) + `}`
	}
	return []byte(`{"items":[` + strings.Join(parts, ",") + `]}`)
}

// TestCountURLObjectNeedsPointer: a count URL whose answer is a JSON
// object, without a #pointer to the count in it, is refused with
// ErrInvalid instead of being counted by its bytes, which made count-once
// fail against a correct server; with the pointer, count-once passes.
func TestCountURLObjectNeedsPointer(t *testing.T) {
	srv := itemServer(t, wrappedList)
	target := conformance.Target{URL: srv.URL + "/items", Body: []byte(body), KeyRequired: true}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c := &conformance.Checker{Concurrency: 4, Timeout: 5 * time.Second, CountURL: srv.URL + "/items"}
	rep, err := c.Run(ctx, target)
	if !errors.Is(err, conformance.ErrInvalid) || !strings.Contains(err.Error(), "#/") {
		logText(t, rep)
		t.Fatalf("Run with a count URL answering a JSON object and no #pointer: %v, want ErrInvalid asking for #/path", err)
	}

	c.CountURL = srv.URL + "/items#/items"
	rep, err = c.Run(ctx, target)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res, _ := rep.Result(conformance.CheckCountOnce); res.Status != conformance.Pass || !rep.Passed() {
		logText(t, rep)
		t.Fatalf("count-once %s (%s) against a server that executed each operation once", res.Status, res.Verdict)
	}
}

// TestCountBySizeNeverFails: a count URL whose answer is not JSON is
// counted by its size in bytes, which grows by more than one record's
// worth when a later record is longer: count-once warns that it counted
// bytes and does not fail a server that executed each operation once.
func TestCountBySizeNeverFails(t *testing.T) {
	srv := itemServer(t, func(ids []int) []byte {
		var b strings.Builder
		for _, id := range ids {
			b.WriteString("item " + strings.Repeat("x", id) + "\n") // each line longer than the last
		}
		return []byte(b.String())
	})
	c := &conformance.Checker{Concurrency: 4, Timeout: 5 * time.Second, CountURL: srv.URL + "/items"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := c.Run(ctx, conformance.Target{URL: srv.URL + "/items", Body: []byte(body), KeyRequired: true})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	res, _ := rep.Result(conformance.CheckCountOnce)
	if res.Status != conformance.Warn || !strings.Contains(res.Verdict, "counted by bytes") || !rep.Passed() {
		logText(t, rep)
		t.Fatalf("count-once %s (%s), want WARN saying it counted bytes", res.Status, res.Verdict)
	}
}

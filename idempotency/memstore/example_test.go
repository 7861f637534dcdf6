package memstore_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

// ExampleNew protects a handler of a single-instance application with the
// in-memory store: the retry of a request is answered from the store, and
// the handler runs once.
func ExampleNew() {
	store := memstore.New()
	defer store.Close() // stops the background sweep

	runs := 0
	h := idempotency.Middleware(store)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"debit":%d}`, runs)
	}))

	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/debits", strings.NewReader(`{"amount":1500}`))
		req.Header.Set("Idempotency-Key", "debit-42")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		fmt.Println(rec.Code, rec.Header().Get("Idempotent-Replayed"), string(body))
	}
	fmt.Println("handler runs:", runs)
	// Output:
	// 201  {"debit":1}
	// 201 true {"debit":1}
	// handler runs: 1
}

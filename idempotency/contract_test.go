package idempotency_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/contract"
)

// TestStoredStatusesFollowTheContract holds the Middleware to the contract's
// table of stored statuses ([contract.Stored]), which the client's table of
// retried statuses is checked against: for every final status, a handler
// answer is replayed to a retry exactly when the table says it is stored.
func TestStoredStatusesFollowTheContract(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	h := idempotency.Middleware(store)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.WriteHeader(code)
	}))
	for s := 200; s <= 599; s++ {
		var replayed bool
		for range 2 {
			r := httptest.NewRequest(http.MethodPost, "/"+strconv.Itoa(s), nil)
			r.Header.Set(idempotency.HeaderIdempotencyKey, "status-"+strconv.Itoa(s))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != s {
				t.Fatalf("%d: answered %d", s, w.Code)
			}
			replayed = w.Header().Get(idempotency.HeaderReplayed) == "true"
		}
		if replayed != contract.Stored(s) {
			t.Errorf("%d: replayed=%v, but contract.Stored says %v", s, replayed, contract.Stored(s))
		}
	}
}

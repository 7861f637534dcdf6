package pgstore_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
)

// TestReplayKeepsEveryByte is the regression test of answers and scopes
// that PostgreSQL's text and jsonb types cannot hold: a Location with a NUL
// byte (jsonb refused it, so every Complete failed and the key ran again
// after each lease), an ETag with invalid UTF-8 (it came back as U+FFFD), and
// a scope with NUL and invalid UTF-8 (every Claim failed). Through the
// Middleware, in both modes: the handler runs once and the replay is byte
// for byte.
func TestReplayKeepsEveryByte(t *testing.T) {
	for _, mode := range []string{"lease", "tx"} {
		t.Run(mode, func(t *testing.T) {
			pool := newPool(t)
			var store idempotency.Store = newStore(t, pool)
			if mode == "tx" {
				store = pgstore.NewTx(pool, pgstore.WithTable(store.(*pgstore.Store).Table()))
			}
			var runs atomic.Int64
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.Header()["Location"] = []string{"/payments/p\x00q"}
				w.Header()["Etag"] = []string{"\"\xff\xc3\x28\""}
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte("\x00\xff body"))
			})
			h := idempotency.Middleware(store, idempotency.WithScope(func(*http.Request) (string, error) {
				return "tenant\x00\xff\xc3\x28", nil
			}))(app)
			send := func() *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1}`)).WithContext(ctxT(t))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set(idempotency.HeaderIdempotencyKey, "bytes-key")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			first, replay := send(), send()
			if first.Code != http.StatusCreated || replay.Code != http.StatusCreated {
				t.Fatalf("answers %d and %d, want 201 twice", first.Code, replay.Code)
			}
			if replay.Header().Get(idempotency.HeaderReplayed) != "true" {
				t.Fatalf("second answer is not a replay: %v", replay.Header())
			}
			for _, name := range []string{"Location", "Etag"} {
				if got, want := replay.Header()[name], first.Header()[name]; len(got) != 1 || got[0] != want[0] {
					t.Errorf("replayed %s = %q, want %q", name, got, want)
				}
			}
			if !bytes.Equal(replay.Body.Bytes(), first.Body.Bytes()) {
				t.Errorf("replayed body %q, want %q", replay.Body.Bytes(), first.Body.Bytes())
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
		})
	}
}

package mockserver_test

import (
	"net/http"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestCountersUseTheMiddlewaresKey sends one operation under two sf-string
// forms of its key: the attempts and the execution are counted under the
// key the middleware reads, unquoted and unescaped.
func TestCountersUseTheMiddlewaresKey(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	const key = `order "9"`
	for _, wire := range []string{`"order \"9\""`, ` "order \"9\"" `} {
		resp, _ := mustSend(t, srv, http.MethodPost, "/payments", wire, `{"amount":100,"currency":"EUR","recipient":"user_9"}`)
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("%q: status %d", wire, resp.StatusCode)
		}
	}
	if a, e := srv.Attempts(key), srv.Executions(key); a != 2 || e != 1 {
		t.Fatalf("key %q: %d attempts, %d executions; want 2 and 1", key, a, e)
	}
}

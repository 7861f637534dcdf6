package exampletest

import (
	"testing"

	"github.com/saferetry/saferetry/internal/testenv"
)

// Post sends one POST of the JSON body with the Idempotency-Key key to url
// through http.DefaultClient (see testenv.Post) and returns the whole
// answer; it fails t when no answer came.
func Post(t *testing.T, url, key, body string) testenv.Reply {
	t.Helper()
	r := testenv.Post(t.Context(), nil, url, key, body)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	return r
}

package saferetryablehttp

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestSuppliedKeyHeaderValidated: a key header the caller supplied is
// validated as the Transport validates it, and nothing is sent when it is
// invalid: an empty value (the adapter took it for "no key" and generated
// one in its place) and a key under a non-canonical name (the adapter
// generated a second key beside it). Found by a review helper.
func TestSuppliedKeyHeaderValidated(t *testing.T) {
	for name, set := range map[string]func(http.Header){
		"empty":         func(h http.Header) { h.Set(saferetry.HeaderIdempotencyKey, "") },
		"non-canonical": func(h http.Header) { h["idempotency-key"] = []string{"order-42-debit"} },
	} {
		t.Run(name, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Status(201))
			c := newRetryable(t, rc)
			req := rhReq(t, context.Background(), http.MethodPost, "x")
			set(req.Header)
			resp, err := c.Do(req)
			if resp != nil {
				resp.Body.Close()
			}
			if seen := rc.Seen(); !errors.Is(err, saferetry.ErrInvalidKey) || len(seen) != 0 {
				t.Errorf("err = %v, %d attempts sent; want ErrInvalidKey and nothing sent", err, len(seen))
			}
		})
	}
}

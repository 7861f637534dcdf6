package conformance_test

import (
	"context"
	"fmt"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/mockserver"
)

// Check the mock server's POST /payments, as saferetry check does.
func Example() {
	srv := mockserver.New()
	defer srv.Close()

	var c conformance.Checker // ProfileIETF, a burst of 20
	rep, err := c.Run(context.Background(), conformance.Target{
		URL:         srv.URL + "/payments",
		Body:        []byte(`{"amount":1250,"currency":"EUR","recipient":"alice"}`),
		KeyRequired: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, id := range []string{conformance.CheckReplay, conformance.CheckReuseStatus, conformance.CheckConcurrentOnce, conformance.CheckMissingKey} {
		res, _ := rep.Result(id)
		fmt.Println(res.Status, res.Level, res.ID, "-", res.Title)
	}
	fmt.Println("every MUST passed:", rep.Passed())
	// Output:
	// PASS MUST replay - same key and body: same status and body, byte for byte
	// PASS SHOULD reuse-status - same key, another body: 422 (stripe: 400, 409 or 422)
	// PASS MUST concurrent-once - concurrent requests with one key execute once
	// PASS SHOULD missing-key - no key, key required: 400
	// every MUST passed: true
}

package saferetryablehttp_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/saferetryablehttp"
)

// A go-retryablehttp client pays through the reference server, whose first
// answer is a 503: the retry carries the same key, and the server's own
// records show one execution in two attempts.
func ExampleConfigure() {
	srv := mockserver.New()
	defer srv.Close()
	srv.FailNext(1, http.StatusServiceUnavailable)

	c := retryablehttp.NewClient()
	c.Logger = nil
	c.HTTPClient = srv.Client()
	c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, 5*time.Millisecond
	saferetryablehttp.Configure(c)

	ctx := saferetry.WithKey(context.Background(), "payment-0043")
	req, _ := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments",
		[]byte(`{"amount":1500,"currency":"EUR","recipient":"user_42"}`))
	resp, err := c.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()

	fmt.Println("status:", resp.StatusCode)
	fmt.Println("executions:", srv.Executions("payment-0043"), "attempts:", srv.Attempts("payment-0043"))
	// Output:
	// status: 201
	// executions: 1 attempts: 2
}

package saferetry_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/mockserver"
)

// The whole story against the reference server: the first attempt fails
// with 503, the second is executed but its answer is lost, and the third
// gets the stored answer replayed. The server's own records show one
// execution of the payment and three attempts.
func Example_mockServer() {
	srv := mockserver.New()
	defer srv.Close()
	srv.FailNext(1, http.StatusServiceUnavailable)
	srv.DropAfterCommitNext(1)

	client := saferetry.NewClient(
		saferetry.WithHTTPClient(srv.Client()),
		saferetry.WithBackoff(fastBackoff),
	)
	ctx := saferetry.WithKey(context.Background(), "payment-0042")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments",
		strings.NewReader(`{"amount":1500,"currency":"EUR","recipient":"user_42"}`))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()

	fmt.Println("status:", resp.StatusCode, "replayed:", resp.Header.Get(saferetry.HeaderReplayed))
	fmt.Println("executions:", srv.Executions("payment-0042"), "attempts:", srv.Attempts("payment-0042"))
	// Output:
	// status: 201 replayed: true
	// executions: 1 attempts: 3
}

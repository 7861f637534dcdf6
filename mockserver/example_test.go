package mockserver_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/mockserver"
)

// quick is a saferetry schedule short enough for examples.
func quick() backoff.BackOff { return backoff.NewConstantBackOff(5 * time.Millisecond) }

// The classic failure: the server commits the payment, then the connection
// drops before the answer arrives. The client retries with the same key and
// gets the stored answer; the server's records show one execution.
func Example() {
	srv := mockserver.New()
	defer srv.Close()
	srv.DropAfterCommitNext(1)

	client := saferetry.NewClient(
		saferetry.WithHTTPClient(srv.Client()),
		saferetry.WithBackoff(quick),
	)
	ctx := saferetry.WithKey(context.Background(), "order-1001")
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/payments",
		strings.NewReader(`{"amount":1250,"currency":"EUR","recipient":"alice"}`))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()

	fmt.Println("status:", resp.StatusCode, "replayed:", resp.Header.Get("Idempotent-Replayed"))
	st := srv.Stats("order-1001")
	fmt.Println("attempts:", st.Attempts, "executions:", st.Executions)
	for _, a := range st.History {
		fmt.Println(" ", a.Status, a.Outcome)
	}
	fmt.Println("EUR balance:", srv.Balance("EUR"))
	// Output:
	// status: 201 replayed: true
	// attempts: 2 executions: 1
	//   0 dropped_after_commit
	//   201 replayed
	// EUR balance: 998750
}

func ExampleServer_FailNext() {
	srv := mockserver.New()
	defer srv.Close()
	srv.FailNext(2, http.StatusServiceUnavailable)

	rt := saferetry.NewTransport(srv.Client().Transport, saferetry.WithBackoff(quick))
	ctx := saferetry.WithKey(context.Background(), "order-1002")
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/payments",
		strings.NewReader(`{"amount":500,"currency":"USD","recipient":"bob"}`))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	resp.Body.Close()
	fmt.Println("status:", resp.StatusCode)
	fmt.Println("attempts:", srv.Attempts("order-1002"), "executions:", srv.Executions("order-1002"))
	// Output:
	// status: 201
	// attempts: 3 executions: 1
}

// A duplicate sent while the first request is still executing meets 409 in
// progress; the client waits and then receives the replayed answer.
func ExampleServer_DelayNext() {
	srv := mockserver.New()
	defer srv.Close()
	srv.DelayNext(1, 200*time.Millisecond)

	rt := saferetry.NewTransport(srv.Client().Transport,
		saferetry.WithBackoff(quick),
		saferetry.WithMaxAttempts(40),
		saferetry.WithMaxRetryAfter(20*time.Millisecond), // the 409's Retry-After is whole seconds
	)
	send := func() int {
		ctx := saferetry.WithKey(context.Background(), "order-1003")
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/payments",
			strings.NewReader(`{"amount":700,"currency":"EUR","recipient":"carol"}`))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	first := make(chan int, 1)
	go func() { first <- send() }()
	for len(srv.Faults().Delays) > 0 { // until the first execution holds the key
		time.Sleep(time.Millisecond)
	}
	second := send()
	fmt.Println(<-first, second)

	met409 := false
	for _, a := range srv.Stats("order-1003").History {
		met409 = met409 || a.Outcome == mockserver.OutcomeInProgress
	}
	fmt.Println("executions:", srv.Executions("order-1003"), "a duplicate met 409:", met409)
	// Output:
	// 201 201
	// executions: 1 a duplicate met 409: true
}

// Past the TTL a key is new again: ExpireKeys makes it happen at once.
func ExampleServer_ExpireKeys() {
	srv := mockserver.New()
	defer srv.Close()
	body := `{"amount":100,"currency":"EUR","recipient":"dave"}`
	post := func() string {
		req, _ := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "order-1004")
		resp, err := srv.Client().Do(req)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return fmt.Sprint(resp.StatusCode, " replayed=", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	fmt.Println(post())
	fmt.Println(post())
	srv.ExpireKeys()
	fmt.Println(post())
	fmt.Println("executions:", srv.Executions("order-1004"))
	// Output:
	// 201 replayed=false
	// 201 replayed=true
	// 201 replayed=false
	// executions: 2
}

// Servers given one store act as instances of one service: a key that
// executed on one is replayed by the other.
func ExampleWithStore() {
	st := memstore.New()
	defer st.Close()
	a := mockserver.New(mockserver.WithStore(st))
	defer a.Close()
	b := mockserver.New(mockserver.WithStore(st))
	defer b.Close()

	body := `{"amount":300,"currency":"EUR","recipient":"erin"}`
	for _, srv := range []*mockserver.Server{a, b} {
		req, _ := http.NewRequest("POST", srv.URL+"/payments", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", "order-1005")
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("executions on a:", a.Executions("order-1005"), "on b:", b.Executions("order-1005"))
	// Output:
	// 201 replayed: false
	// 201 replayed: true
	// executions on a: 1 on b: 0
}

// Clients in other languages use the admin API under /_mock/.
func Example_adminAPI() {
	srv := mockserver.New()
	defer srv.Close()
	do := func(method, path, key, body string) string {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprint(resp.StatusCode, " ", strings.TrimSpace(string(b)))
	}
	fmt.Println(do("POST", "/_mock/fail", "", `{"count":1,"status":503}`))
	pay := `{"amount":200,"currency":"EUR","recipient":"frank"}`
	fmt.Println(do("POST", "/payments", "order-1006", pay)[:3])
	fmt.Println(do("POST", "/payments", "order-1006", pay)[:3])
	// Each attempt's arrival and duration differ on every run.
	timing := regexp.MustCompile(`"at":"[^"]+","duration_ms":[0-9.e+-]+`)
	fmt.Println(timing.ReplaceAllString(do("GET", "/_mock/keys/order-1006", "", ""), `"at":"...","duration_ms":...`))
	// Output:
	// 200 {"fail":[503],"drop_after_commit":0,"delay_ms":[],"latency_ms":0}
	// 503
	// 201
	// 200 {"key":"order-1006","attempts":2,"executions":1,"payments":1,"history":[{"status":503,"outcome":"injected_failure","at":"...","duration_ms":...},{"status":201,"outcome":"executed","at":"...","duration_ms":...}]}
}

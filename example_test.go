package saferetry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/saferetry/saferetry"
)

// flakyServer fails the first attempt of every key with 503 and then
// answers 201, printing what it saw.
func flakyServer() *httptest.Server {
	var mu sync.Mutex
	seen := map[string]int{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get(saferetry.HeaderIdempotencyKey)
		mu.Lock()
		seen[key]++
		n := seen[key]
		mu.Unlock()
		fmt.Printf("server: attempt %d, %s %q, key present: %v\n", n, r.Method, body, key != "")
		if n == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "debited")
	}))
}

func fastBackoff() backoff.BackOff { return backoff.NewConstantBackOff(time.Millisecond) }

func ExampleNewTransport() {
	srv := flakyServer()
	defer srv.Close()

	client := &http.Client{Transport: saferetry.NewTransport(nil, saferetry.WithBackoff(fastBackoff))}
	resp, err := client.Post(srv.URL, "text/plain", strings.NewReader("debit 1500"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	key, _ := saferetry.KeyFromResponse(resp)
	fmt.Println(resp.StatusCode, string(body), len(key))
	// Output:
	// server: attempt 1, POST "debit 1500", key present: true
	// server: attempt 2, POST "debit 1500", key present: true
	// 201 debited 36
}

func ExampleWithKey() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("server got key", r.Header.Get(saferetry.HeaderIdempotencyKey))
	}))
	defer srv.Close()

	c := saferetry.NewClient()
	ctx := saferetry.WithKey(context.Background(), "order-42-debit")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("debit 1500"))
	resp, err := c.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	// Output:
	// server got key order-42-debit
}

func ExampleClient_Do() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"type":"about:blank","title":"Idempotency key reused","status":422,"detail":"the key was used with another payload"}`)
	}))
	defer srv.Close()

	c := saferetry.NewClient()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("debit 1500"))
	_, err := c.Do(req)

	var apiErr *saferetry.APIError
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.Attempts, apiErr.Problem.Detail)
	}
	fmt.Println(errors.Is(err, saferetry.ErrKeyReused))
	// Output:
	// 422 1 the key was used with another payload
	// true
}

// ExampleClient_Do_outcomes tells the outcomes of an operation apart, as
// the README's client section does.
func ExampleClient_Do_outcomes() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	ctx := saferetry.WithKey(context.Background(), "order-42-debit")
	url, body := srv.URL, strings.NewReader("debit 1500")

	client := saferetry.NewClient()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	resp, err := client.Do(req)
	var apiErr *saferetry.APIError
	switch {
	case errors.Is(err, saferetry.ErrOutcomeUnknown):
		// The last attempt got no answer: the debit may have happened.
		// Retry later with the same key (err carries it), never a new one.
		fmt.Println("outcome unknown:", err)
	case errors.Is(err, saferetry.ErrKeyReused): // 422: same key, other payload
		fmt.Println("key reused:", err)
	case errors.As(err, &apiErr): // any other final status >= 400
		fmt.Println("refused:", apiErr.StatusCode)
	case err != nil:
		fmt.Println("failed:", err)
	default:
		defer resp.Body.Close()
		key, _ := saferetry.KeyFromResponse(resp) // the key of the operation
		fmt.Printf("debited under key %s\n", key)
	}
	// Output:
	// debited under key order-42-debit
}

func ExampleError() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close() // the request arrived; the answer is lost
	}))
	defer srv.Close()

	c := saferetry.NewClient(saferetry.WithMaxAttempts(2), saferetry.WithBackoff(fastBackoff))
	ctx := saferetry.WithKey(context.Background(), "debit-7")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("debit 1500"))
	_, err := c.Do(req)

	var e *saferetry.Error
	if errors.As(err, &e) {
		fmt.Println(errors.Is(err, saferetry.ErrOutcomeUnknown), e.Key, e.Attempts)
		fmt.Println("stopped by:", e.Reason) // what stopped the retries
	}
	// Output:
	// true debit-7 2
	// stopped by: max attempts
}

// ExampleAPIError_gaveUp tells a status the server meant as final from
// one that a limit stopped retrying, by the APIError's Reason.
func ExampleAPIError_gaveUp() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	c := saferetry.NewClient(saferetry.WithMaxAttempts(3), saferetry.WithBackoff(fastBackoff))
	for _, path := range []string{"/debits", "/missing"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("debit 1500"))
		_, err := c.Do(req)
		var apiErr *saferetry.APIError
		if errors.As(err, &apiErr) {
			fmt.Printf("%d (attempts: %d): %s, gave up: %v\n",
				apiErr.StatusCode, apiErr.Attempts, apiErr.Reason, apiErr.Reason.IsLimit())
		}
	}
	// Output:
	// 503 (attempts: 3): max attempts, gave up: true
	// 404 (attempts: 1): final status, gave up: false
}

// cutFirstAnswerServer executes each key once and keeps its answer, but
// loses the connection half-way through the first answer's body; asked
// again with the key, it replays the answer whole.
func cutFirstAnswerServer() *httptest.Server {
	var mu sync.Mutex
	answers := map[string]string{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get(saferetry.HeaderIdempotencyKey)
		mu.Lock()
		answer, done := answers[key]
		if !done {
			answer = fmt.Sprintf(`{"debit":%q,"status":"paid"}`, body)
			answers[key] = answer
		}
		mu.Unlock()
		if done {
			w.Header().Set(saferetry.HeaderReplayed, "true")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, answer)
			return
		}
		fmt.Println("server: executed")
		conn, buf, _ := w.(http.Hijacker).Hijack()
		fmt.Fprintf(buf, "HTTP/1.1 201 Created\r\nContent-Length: %d\r\n\r\n%s", len(answer), answer[:len(answer)/2])
		buf.Flush()
		conn.Close() // the debit is done; its answer is cut short
	}))
}

// A response whose body cannot be read whole belongs to an operation
// that happened: its status says how it ended. Ask again under its key
// (KeyFromResponse, then WithKey) for the stored answer, replayed whole,
// never under a new key, which would debit twice.
func ExampleKeyFromResponse() {
	srv := cutFirstAnswerServer()
	defer srv.Close()
	client := saferetry.NewClient()
	debit := func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("debit 1500"))
		return client.Do(req)
	}

	resp, err := debit(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, err)
	if err != nil {
		key, _ := saferetry.KeyFromResponse(resp)
		resp, err = debit(saferetry.WithKey(context.Background(), key))
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get(saferetry.HeaderReplayed), string(body))
	}
	// Output:
	// server: executed
	// 201 unexpected EOF
	// 201 true {"debit":"debit 1500","status":"paid"}
}

// A plain http.Client over the Transport returns a final 503 as an
// answer, not an error: ReasonFromResponse tells whether a limit gave up
// on it (here the attempt limit) or it was final.
func ExampleReasonFromResponse() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	client := &http.Client{Transport: saferetry.NewTransport(nil, saferetry.WithMaxAttempts(3), saferetry.WithBackoff(fastBackoff))}
	for _, path := range []string{"/debits", "/missing"} {
		resp, err := client.Post(srv.URL+path, "text/plain", strings.NewReader("debit 1500"))
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		reason, _ := saferetry.ReasonFromResponse(resp)
		fmt.Printf("%d: %s, gave up: %v\n", resp.StatusCode, reason, reason.IsLimit())
	}
	// Output:
	// 503: max attempts, gave up: true
	// 404: final status, gave up: false
}

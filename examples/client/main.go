// Command client is a saferetry client talking to the standalone mock server
// over the network, the way a client in any language would: it injects
// faults through the mock server's admin API (/_mock/...), makes payments
// with saferetry.Client, and checks the server's counters over HTTP.
//
// Start the mock server, then the client:
//
//	go run ./cmd/mockserver -addr 127.0.0.1:8080
//	go run ./examples/client -url http://127.0.0.1:8080
//
// It exits with status 1 if a payment did not execute exactly once.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/examples/internal/serve"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "base URL of the mock server (go run ./cmd/mockserver)")
	flag.Parse()
	serve.Main("client", func(ctx context.Context) error { return run(ctx, strings.TrimRight(*base, "/"), os.Stdout) })
}

// fault is one admin call that injects a fault before a payment.
type fault struct {
	path, body string
}

func run(ctx context.Context, base string, w io.Writer) error {
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-url %q: want the mock server's base URL, such as http://127.0.0.1:8080", base)
	}
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var sent atomic.Int32 // attempts of the current payment made by the client
	client := saferetry.NewClient(
		saferetry.WithLogger(logger),
		saferetry.WithHook(func(saferetry.Attempt) { sent.Add(1) }),
		saferetry.WithMaxAttempts(8),
		saferetry.WithAttemptTimeout(2*time.Second),
		saferetry.WithBackoff(func() backoff.BackOff {
			return backoff.NewExponentialBackOff(backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxElapsedTime(0))
		}),
		saferetry.WithMaxRetryAfter(500*time.Millisecond),
	)
	// The admin API gets its own connections, so that none of them is
	// reused by a payment.
	plain := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}

	cases := []struct {
		name   string
		faults []fault
	}{
		{"answer lost after commit", []fault{{"drop-after-commit", `{"count":1}`}}},
		{"two 503s", []fault{{"fail", `{"count":2,"status":503}`}}},
		{"a 429, then a slow execution and a lost answer", []fault{
			{"fail", `{"count":1,"status":429}`},
			{"delay", `{"count":1,"delay_ms":200}`},
			{"drop-after-commit", `{"count":1}`},
		}},
	}
	failed := 0
	for _, c := range cases {
		fmt.Fprintf(w, "\n== %s\n", c.name)
		for _, f := range c.faults {
			if err := admin(ctx, plain, "POST", base+"/_mock/"+f.path, f.body, nil); err != nil {
				return fmt.Errorf("inject %s (is the mock server running at %s?): %w", f.path, base, err)
			}
		}
		sent.Store(0)
		key, err := saferetry.NewKey()
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(saferetry.WithKey(ctx, key), "POST", base+"/payments",
			strings.NewReader(`{"amount":1000,"currency":"EUR","recipient":"acme"}`))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		var p struct{ ID string }
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil {
			return err
		}

		var st struct {
			Attempts, Executions int
		}
		if err := admin(ctx, plain, "GET", base+"/_mock/keys/"+url.PathEscape(key), "", &st); err != nil {
			return err
		}
		verdict := "exactly once"
		if st.Executions != 1 {
			verdict = "NOT exactly once"
			failed++
		}
		fmt.Fprintf(w, "   payment %s: %d attempts sent, %d seen by the server, %d execution(s): %s\n",
			p.ID, sent.Load(), st.Attempts, st.Executions, verdict)
		if st.Attempts > int(sent.Load()) {
			fmt.Fprintln(w, "   (net/http itself resent the request once: it carries an Idempotency-Key and a reused\n"+
				"    keep-alive connection closed before any answer)")
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d payment(s) did not execute exactly once", failed)
	}
	fmt.Fprintln(w, "\nevery payment executed exactly once")
	return nil
}

// admin calls the mock server's admin API and decodes its JSON answer into
// out when out is not nil.
func admin(ctx context.Context, c *http.Client, method, u, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

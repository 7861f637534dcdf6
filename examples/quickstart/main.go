// Command quickstart shows saferetry end to end in a few seconds, with
// nothing to install: it starts the mock payments server in process, makes
// it fail the way real networks do (an answer lost after the payment was
// committed, 503s, a duplicate sent while the original is still running),
// makes payments through the saferetry client with every attempt logged,
// and then checks from the server's own records that every payment executed
// exactly once and that the balance is right.
//
//	go run ./examples/quickstart
//
// It exits with status 1 if any payment executed twice, went missing, or the
// balance is off. It takes no flags and no arguments: -h prints this usage,
// anything else is refused with status 2. Ctrl-C or SIGTERM stops it (status
// 1).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/examples/internal/serve"
	"github.com/saferetry/saferetry/mockserver"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "Usage of quickstart: go run ./examples/quickstart\n"+
			"Pays through the saferetry client against an in-process mock server that drops answers, fails\n"+
			"and meets a duplicate, then checks from the server's records that every payment executed exactly\n"+
			"once; exit status 1 if not. It takes no flags.\n")
	}
	flag.Parse()
	serve.Main("quickstart", func(ctx context.Context) error { return run(ctx, os.Stdout) })
}

// currency is the currency of every payment of the demo.
const currency = "EUR"

// op is one logical payment: what the client asked and what it got back.
type op struct {
	title  string
	key    string
	amount int64
	id     string // the payment id the client received
}

// run is the whole demo; it writes its story to w and returns an error when
// the verdict is not "exactly once".
func run(ctx context.Context, w io.Writer) error {
	srv := mockserver.New()
	defer srv.Close()
	start := srv.Balance(currency)
	fmt.Fprintf(w, "mock payments server at %s, %s balance %d\n", srv.URL, currency, start)

	// Every attempt is logged with its key; time stamps are left out to keep
	// the lines short.
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "host", "method":
				return slog.Attr{}
			}
			return a
		},
	}))
	sent := newCounter() // attempts the client made, per key
	// The client keeps its defaults: 4 attempts, exponential backoff, and
	// the server's Retry-After.
	client := saferetry.NewClient(
		saferetry.WithHTTPClient(srv.Client()),
		saferetry.WithLogger(logger),
		saferetry.WithHook(func(a saferetry.Attempt) { sent.add(a.Key) }),
	)

	var ops []*op
	step := func(title, fault string, amount int64) (*op, error) {
		key, err := saferetry.NewKey()
		if err != nil {
			return nil, err
		}
		o := &op{title: title, key: key, amount: amount}
		ops = append(ops, o)
		fmt.Fprintf(w, "\n== %d. %s\n   server fault: %s\n", len(ops), title, fault)
		return o, nil
	}

	// 1. The answer is lost after the server committed the payment: a naive
	// client retries without a key and pays twice.
	o, err := step("the answer is lost after the server committed the payment", "DropAfterCommitNext(1)", 1250)
	if err != nil {
		return err
	}
	srv.DropAfterCommitNext(1)
	if err := pay(ctx, client, srv.URL, o, w); err != nil {
		return err
	}

	// 2. The server is briefly unavailable.
	if o, err = step("the server answers 503 twice", "FailNext(2, 503)", 3000); err != nil {
		return err
	}
	srv.FailNext(2, http.StatusServiceUnavailable)
	if err := pay(ctx, client, srv.URL, o, w); err != nil {
		return err
	}

	// 3. A double click: the same payment sent again while the first is
	// still executing. The duplicate meets 409 in progress, waits, and gets
	// the first one's answer.
	if o, err = step("the same payment is sent twice at once while the first is slow", "DelayNext(1, 300ms)", 4200); err != nil {
		return err
	}
	srv.DelayNext(1, 300*time.Millisecond)
	if err := payTwiceAtOnce(ctx, client, srv, o, w); err != nil {
		return err
	}

	// 4. Everything at once: a 502, then a lost answer.
	if o, err = step("a 502, then the answer is lost after commit", "FailNext(1, 502) + DropAfterCommitNext(1)", 999); err != nil {
		return err
	}
	srv.FailNext(1, http.StatusBadGateway)
	srv.DropAfterCommitNext(1)
	if err := pay(ctx, client, srv.URL, o, w); err != nil {
		return err
	}

	return verify(srv, ops, sent, start, w)
}

// pay sends one payment through client and records the payment id it got.
func pay(ctx context.Context, client *saferetry.Client, baseURL string, o *op, w io.Writer) error {
	id, replayed, err := send(ctx, client, baseURL, o)
	if err != nil {
		return fmt.Errorf("payment %q: %w", o.title, err)
	}
	o.id = id
	fmt.Fprintf(w, "   => %s, key %s (replayed answer: %v)\n", id, o.key, replayed)
	return nil
}

// payTwiceAtOnce sends the same payment twice with one key: the second
// leaves once the first is executing on the server.
func payTwiceAtOnce(ctx context.Context, client *saferetry.Client, srv *mockserver.Server, o *op, w io.Writer) error {
	type result struct {
		id       string
		replayed bool
		err      error
	}
	var wg sync.WaitGroup
	results := make([]result, 2)
	launch := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, replayed, err := send(ctx, client, srv.URL, o)
			results[i] = result{id, replayed, err}
		}()
	}
	launch(0)
	if err := waitUntil(ctx, func() bool { return len(srv.Faults().Delays) == 0 }); err != nil {
		return err
	}
	launch(1)
	wg.Wait()
	for i, r := range results {
		if r.err != nil {
			return fmt.Errorf("payment %q, send %d: %w", o.title, i+1, r.err)
		}
		fmt.Fprintf(w, "   => send %d: %s, key %s (replayed answer: %v)\n", i+1, r.id, o.key, r.replayed)
	}
	if results[0].id != results[1].id {
		return fmt.Errorf("payment %q: the two sends got different payments %s and %s", o.title, results[0].id, results[1].id)
	}
	o.id = results[0].id
	return nil
}

// send posts the payment of o with its key and returns the payment id.
func send(ctx context.Context, client *saferetry.Client, baseURL string, o *op) (id string, replayed bool, err error) {
	body := fmt.Sprintf(`{"amount":%d,"currency":%q,"recipient":"acct_%s"}`, o.amount, currency, o.key[:8])
	req, err := http.NewRequestWithContext(saferetry.WithKey(ctx, o.key), http.MethodPost, baseURL+"/payments", strings.NewReader(body))
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	var p mockserver.Payment
	if err := decodeJSON(resp.Body, &p); err != nil {
		return "", false, err
	}
	return p.ID, resp.Header.Get("Idempotent-Replayed") == "true", nil
}

// verify checks the server's own records: one execution and one payment per
// key, the ids the client received, and the balance.
func verify(srv *mockserver.Server, ops []*op, sent *counter, start int64, w io.Writer) error {
	fmt.Fprintf(w, "\n== what the server recorded\n")
	fmt.Fprintf(w, "   %-36s  %-15s  %10s  %s\n", "key", "attempts", "executions", "how the server answered each attempt")
	var problems []error
	var spent int64
	hidden := false
	for _, o := range ops {
		st := srv.Stats(o.key)
		outcomes := make([]string, len(st.History))
		for i, a := range st.History {
			outcomes[i] = string(a.Outcome)
			if a.Status != 0 {
				outcomes[i] = fmt.Sprintf("%d %s", a.Status, a.Outcome)
			}
		}
		attempts := fmt.Sprintf("%d sent, %d seen", sent.get(o.key), st.Attempts)
		hidden = hidden || st.Attempts > sent.get(o.key)
		fmt.Fprintf(w, "   %-36s  %-15s  %10d  %s\n", o.key, attempts, st.Executions, strings.Join(outcomes, ", "))
		if st.Executions != 1 {
			problems = append(problems, fmt.Errorf("key %s executed %d times", o.key, st.Executions))
		}
		var ids []string
		for _, p := range srv.Payments() {
			if p.IdempotencyKey == o.key {
				ids = append(ids, p.ID)
			}
		}
		switch {
		case len(ids) != 1:
			problems = append(problems, fmt.Errorf("key %s has %d payments on the server, want 1", o.key, len(ids)))
		case ids[0] != o.id:
			problems = append(problems, fmt.Errorf("key %s: the client got %s, the server holds %s", o.key, o.id, ids[0]))
		}
		spent += o.amount
	}
	if n := len(srv.Payments()); n != len(ops) {
		problems = append(problems, fmt.Errorf("the server holds %d payments for %d operations", n, len(ops)))
	}
	bal := srv.Balance(currency)
	fmt.Fprintf(w, "   %s balance: %d - %d = %d expected, %d on the server\n", currency, start, spent, start-spent, bal)
	if bal != start-spent {
		problems = append(problems, fmt.Errorf("balance is %d, want %d", bal, start-spent))
	}
	if hidden {
		fmt.Fprintf(w, "   (more attempts seen than sent: net/http itself resends a request that carries an\n"+
			"    Idempotency-Key once when a reused keep-alive connection closes before any answer)\n")
	}
	if len(problems) > 0 {
		fmt.Fprintf(w, "\nVERDICT: FAIL\n")
		return errors.Join(problems...)
	}
	fmt.Fprintf(w, "\nVERDICT: PASS: %d payments, each executed exactly once despite the faults; the balance is right.\n", len(ops))
	fmt.Fprintln(w, "The same under kill -9, SIGSTOP and store restarts, three real server processes over Redis or PostgreSQL: go run ./cmd/chaos")
	return nil
}

// waitUntil polls cond every millisecond until it holds or ctx ends.
func waitUntil(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

func decodeJSON(r io.Reader, v any) error {
	return json.NewDecoder(r).Decode(v)
}

// counter counts attempts per key; it is safe for concurrent use.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func newCounter() *counter { return &counter{n: make(map[string]int)} }

func (c *counter) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[key]++
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

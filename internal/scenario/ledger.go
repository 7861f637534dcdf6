package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// Ledger parameters.
const (
	ledgerInstances = 3
	ledgerAccounts  = 5
	ledgerOps       = 60
)

// fault is what the Ledger scenario does to one operation.
type fault int

const (
	faultNone      fault = iota
	faultDuplicate       // the client sends the operation twice at once
	faultDrop            // the first attempt runs but its response is lost
	faultDuplicateDrop
	faultServer // the handler's first run answers 503 before debiting
	faultCount
)

func (f fault) duplicate() bool { return f == faultDuplicate || f == faultDuplicateDrop }
func (f fault) drop() bool      { return f == faultDrop || f == faultDuplicateDrop }

type debitRequest struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// Ledger debits accounts in book through three instances, each its own
// idempotency.Middleware (built with opts) over store, with the client
// retrying through saferetry.Transport. Operations are sent twice at once,
// have their first response dropped after the server acted, or meet a 503
// on their first run; several distinct operations carry the same account and
// amount. It checks that every operation ends in the same 201 for all its
// sends, and that each account's balance went down by exactly the sum of its
// distinct operations: no debit lost, none doubled. store may be a TxStore;
// then each debit is written through the handed-over transaction if book
// does so.
func Ledger(t *testing.T, store idempotency.Store, book Book, opts ...idempotency.Option) {
	t.Helper()
	run := testenv.RandomName("") // keeps this run's accounts apart in a shared store
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, transactional := store.(idempotency.TxStore)

	accounts := make([]string, ledgerAccounts)
	for i := range accounts {
		accounts[i] = fmt.Sprintf("acct-%s-%d", run, i)
	}
	before, err := book.Balances(ctx)
	if err != nil {
		t.Fatalf("scenario: balances before: %v", err)
	}

	execs := newExecutions()
	var serverFaults sync.Map // key -> *atomic.Bool, set once the 503 was sent
	var serial atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(idempotency.HeaderIdempotencyKey)
		if v, ok := serverFaults.Load(key); ok && v.(*atomic.Bool).CompareAndSwap(false, true) {
			http.Error(w, "injected failure", http.StatusServiceUnavailable)
			return
		}
		var d debitRequest
		if err := json.NewDecoder(r.Body).Decode(&d); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// Hold the claim a little, so that duplicates meet it in progress.
		pause(r.Context(), 5*time.Millisecond)
		if err := book.Debit(r.Context(), d.Account, d.Amount); err != nil {
			t.Logf("key %s: debit failed, answering 500: %v", key, err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		body := fmt.Appendf(nil, `{"account":%q,"amount":%d,"execution":%d}`, d.Account, d.Amount, serial.Add(1))
		execs.record(key, body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	})
	targets := make([]*url.URL, ledgerInstances)
	for i := range targets {
		u, err := url.Parse(startInstance(t, store, handler, opts).srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		targets[i] = u
	}

	rt := &faultyRouter{next: newHTTPClient(t).Transport, targets: targets}
	client := &http.Client{Transport: saferetry.NewTransport(rt,
		saferetry.WithMaxAttempts(20),
		saferetry.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }),
		saferetry.WithMaxRetryAfter(50*time.Millisecond),
		saferetry.WithRetryBudget(1<<20, 1),
	)}

	type op struct {
		key   string
		req   debitRequest
		fault fault
	}
	ops := make([]op, ledgerOps)
	want := make(map[string]int64)
	for i := range ops {
		o := op{
			key: fmt.Sprintf("debit-%s-%02d", run, i),
			// Amounts repeat, so distinct operations often carry the same
			// account and amount: only the key tells them apart.
			req:   debitRequest{Account: accounts[i%ledgerAccounts], Amount: int64(i%7 + 1)},
			fault: fault(i % int(faultCount)),
		}
		if o.fault.drop() {
			rt.dropFirst.Store(o.key, new(atomic.Bool))
		}
		if o.fault == faultServer {
			serverFaults.Store(o.key, new(atomic.Bool))
		}
		want[o.req.Account] += o.req.Amount
		ops[i] = o
	}

	send := func(o op) answer {
		payload, _ := json.Marshal(o.req)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://ledger.invalid/debits", bytes.NewReader(payload))
		if err != nil {
			return answer{err: err}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idempotency.HeaderIdempotencyKey, o.key)
		resp, err := client.Do(req)
		if err != nil {
			return answer{err: err}
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return answer{status: resp.StatusCode, replayed: resp.Header.Get(idempotency.HeaderReplayed) == "true", body: b, err: err}
	}

	results := make([][]answer, len(ops))
	var wg sync.WaitGroup
	for i, o := range ops {
		sends := 1
		if o.fault.duplicate() {
			sends = 2
		}
		results[i] = make([]answer, sends)
		for s := range sends {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i][s] = send(o)
			}()
		}
	}
	wg.Wait()

	for i, o := range ops {
		n, executed := execs.get(o.key)
		switch {
		case n == 0:
			t.Errorf("op %s (%v): never executed", o.key, o.fault)
		case n > 1 && !transactional:
			t.Errorf("op %s (%v): executed %d times", o.key, o.fault, n)
		}
		for _, a := range results[i] {
			switch {
			case a.err != nil:
				t.Errorf("op %s (%v): %v", o.key, o.fault, a.err)
			case a.status != http.StatusCreated:
				t.Errorf("op %s (%v): final answer %d %s, want 201", o.key, o.fault, a.status, a.body)
			case !bytes.Equal(a.body, executed):
				t.Errorf("op %s (%v): answer %s, want the execution's %s", o.key, o.fault, a.body, executed)
			}
		}
		if o.fault.drop() && !rt.dropped(o.key) {
			t.Errorf("op %s: the injected response drop never happened", o.key)
		}
	}

	after, err := book.Balances(ctx)
	if err != nil {
		t.Fatalf("scenario: balances after: %v", err)
	}
	for _, a := range accounts {
		if got := before[a] - after[a]; got != want[a] {
			t.Errorf("account %s: debited %d in total, want %d (the sum of its distinct operations)", a, got, want[a])
		}
	}
	t.Logf("Ledger: %d operations over %d instances, %d attempts routed, %d responses dropped, %d answered 409",
		len(ops), ledgerInstances, rt.attempts.Load(), rt.drops.Load(), rt.conflicts.Load())
}

func (f fault) String() string {
	return [...]string{"no fault", "duplicate", "dropped response", "duplicate and dropped response", "server 503"}[f]
}

// faultyRouter sends each attempt to the next instance in turn and, for the
// keys in dropFirst, lets the first attempt reach the server and then loses
// its response, as a connection reset after the server acted would.
type faultyRouter struct {
	next      http.RoundTripper
	targets   []*url.URL
	dropFirst sync.Map // key -> *atomic.Bool, set once dropped
	attempts  atomic.Int64
	drops     atomic.Int64
	conflicts atomic.Int64 // 409 answers the Transport retried
}

// errDropped is what the client sees of a dropped response.
var errDropped = fmt.Errorf("scenario: connection lost after the request was sent: %w", io.ErrUnexpectedEOF)

func (r *faultyRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	n := r.attempts.Add(1)
	target := r.targets[int(n)%len(r.targets)]
	out := req.Clone(req.Context())
	out.URL.Scheme, out.URL.Host, out.Host = target.Scheme, target.Host, ""
	v, drop := r.dropFirst.Load(req.Header.Get(idempotency.HeaderIdempotencyKey))
	resp, err := r.next.RoundTrip(out)
	if err == nil && resp.StatusCode == http.StatusConflict {
		r.conflicts.Add(1)
	}
	if err != nil || !drop || !v.(*atomic.Bool).CompareAndSwap(false, true) {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r.drops.Add(1)
	return nil, errDropped
}

func (r *faultyRouter) dropped(key string) bool {
	v, ok := r.dropFirst.Load(key)
	return ok && v.(*atomic.Bool).Load()
}

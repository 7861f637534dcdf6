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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := &ledgerRun{t: t, ctx: ctx, book: book, run: testenv.RandomName(""), execs: newExecutions()}
	_, l.transactional = store.(idempotency.TxStore)
	before, err := book.Balances(ctx)
	if err != nil {
		t.Fatalf("scenario: balances before: %v", err)
	}
	targets := make([]*url.URL, ledgerInstances)
	for i := range targets {
		u, err := url.Parse(startInstance(t, store, l.handler(), opts).srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		targets[i] = u
	}
	l.rt = &faultyRouter{next: newHTTPClient(t).Transport, targets: targets}
	l.client = &http.Client{Transport: saferetry.NewTransport(l.rt,
		saferetry.WithMaxAttempts(20),
		saferetry.WithBackoff(func() backoff.BackOff { return backoff.NewConstantBackOff(10 * time.Millisecond) }),
		saferetry.WithMaxRetryAfter(50*time.Millisecond),
		saferetry.WithRetryBudget(1<<20, 1),
	)}
	want := l.makeOps()
	results := l.sendAll()
	l.checkAnswers(results)
	after, err := book.Balances(ctx)
	if err != nil {
		t.Fatalf("scenario: balances after: %v", err)
	}
	for a, w := range want {
		if got := before[a] - after[a]; got != w {
			t.Errorf("account %s: debited %d in total, want %d (the sum of its distinct operations)", a, got, w)
		}
	}
	t.Logf("Ledger: %d operations over %d instances, %d attempts routed, %d responses dropped, %d answered 409",
		len(l.ops), ledgerInstances, l.rt.attempts.Load(), l.rt.drops.Load(), l.rt.conflicts.Load())
}

// ledgerRun is the state of one Ledger scenario.
type ledgerRun struct {
	t             *testing.T
	ctx           context.Context
	book          Book
	run           string // keeps this run's accounts apart in a shared store
	transactional bool
	execs         *executions
	serverFaults  sync.Map // key -> *atomic.Bool, set once the 503 was sent
	serial        atomic.Int64
	rt            *faultyRouter
	client        *http.Client
	ops           []ledgerOp
}

// ledgerOp is one debit and the fault it meets.
type ledgerOp struct {
	key   string
	req   debitRequest
	fault fault
}

// handler debits the book, after a 503 for the keys chosen for one.
func (l *ledgerRun) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(idempotency.HeaderIdempotencyKey)
		if v, ok := l.serverFaults.Load(key); ok && v.(*atomic.Bool).CompareAndSwap(false, true) {
			http.Error(w, "injected failure", http.StatusServiceUnavailable)
			return
		}
		var d debitRequest
		if err := json.NewDecoder(r.Body).Decode(&d); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// Hold the claim a little, so that duplicates meet it in progress.
		testenv.Pause(r.Context(), 5*time.Millisecond)
		if err := l.book.Debit(r.Context(), d.Account, d.Amount); err != nil {
			l.t.Logf("key %s: debit failed, answering 500: %v", key, err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		body := fmt.Appendf(nil, `{"account":%q,"amount":%d,"execution":%d}`, d.Account, d.Amount, l.serial.Add(1))
		l.execs.record(key, body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	})
}

// makeOps makes the operations and their faults, and returns what each
// account must be debited in all.
func (l *ledgerRun) makeOps() map[string]int64 {
	l.ops = make([]ledgerOp, ledgerOps)
	want := make(map[string]int64)
	for i := range l.ops {
		o := ledgerOp{
			key: fmt.Sprintf("debit-%s-%02d", l.run, i),
			// Amounts repeat, so distinct operations often carry the same
			// account and amount: only the key tells them apart.
			req:   debitRequest{Account: fmt.Sprintf("acct-%s-%d", l.run, i%ledgerAccounts), Amount: int64(i%7 + 1)},
			fault: fault(i % int(faultCount)),
		}
		if o.fault.drop() {
			l.rt.dropFirst.Store(o.key, new(atomic.Bool))
		}
		if o.fault == faultServer {
			l.serverFaults.Store(o.key, new(atomic.Bool))
		}
		want[o.req.Account] += o.req.Amount
		l.ops[i] = o
	}
	return want
}

// sendAll sends every operation, twice at once for the duplicated ones.
func (l *ledgerRun) sendAll() [][]answer {
	results := make([][]answer, len(l.ops))
	var wg sync.WaitGroup
	for i, o := range l.ops {
		sends := 1
		if o.fault.duplicate() {
			sends = 2
		}
		results[i] = make([]answer, sends)
		for s := range sends {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i][s] = l.send(o)
			}()
		}
	}
	wg.Wait()
	return results
}

func (l *ledgerRun) send(o ledgerOp) answer {
	payload, _ := json.Marshal(o.req)
	req, err := http.NewRequestWithContext(l.ctx, http.MethodPost, "http://ledger.invalid/debits", bytes.NewReader(payload))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idempotency.HeaderIdempotencyKey, o.key)
	resp, err := l.client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, replayed: resp.Header.Get(idempotency.HeaderReplayed) == "true", body: b, err: err}
}

// checkAnswers checks that every operation ran once and that all its
// sends got that execution's 201.
func (l *ledgerRun) checkAnswers(results [][]answer) {
	t := l.t
	for i, o := range l.ops {
		n, executed := l.execs.get(o.key)
		switch {
		case n == 0:
			t.Errorf("op %s (%v): never executed", o.key, o.fault)
		case n > 1 && !l.transactional:
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
		if o.fault.drop() && !l.rt.dropped(o.key) {
			t.Errorf("op %s: the injected response drop never happened", o.key)
		}
	}
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

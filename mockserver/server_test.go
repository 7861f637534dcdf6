package mockserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/internal/testkit"
	"github.com/saferetry/saferetry/mockserver"
)

const payBody = `{"amount":1250,"currency":"EUR","recipient":"alice"}`

// send makes one request with no retries; key "" sends none. It is safe to
// call from any goroutine.
func send(t *testing.T, srv *mockserver.Server, method, path, key, body string) (*http.Response, []byte, error) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		return nil, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// mustSend is send for requests that must get an answer.
func mustSend(t *testing.T, srv *mockserver.Server, method, path, key, body string) (*http.Response, []byte) {
	t.Helper()
	resp, b, err := send(t, srv, method, path, key, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp, b
}

type problemBody struct {
	Type   string                  `json:"type"`
	Status int                     `json:"status"`
	Errors []mockserver.FieldError `json:"errors"`
	Key    string                  `json:"idempotency_key"`
}

func decodeJSON[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func wantProblem(t *testing.T, resp *http.Response, body []byte, status int, typ string) problemBody {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	p := decodeJSON[problemBody](t, body)
	if p.Type != typ || p.Status != status {
		t.Errorf("problem = %+v, want type %s status %d", p, typ, status)
	}
	return p
}

func TestPaymentExecutesOnceAndReplays(t *testing.T) {
	srv := mockserver.New(mockserver.WithBalance("EUR", 10_000))
	defer srv.Close()

	resp, body := mustSend(t, srv, "POST", "/payments", "k-1", payBody)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status = %d, body %s", resp.StatusCode, body)
	}
	p := decodeJSON[mockserver.Payment](t, body)
	if !strings.HasPrefix(p.ID, "pay_") || p.Amount != 1250 || p.Currency != "EUR" || p.Recipient != "alice" ||
		p.IdempotencyKey != "k-1" || p.Status != "succeeded" {
		t.Errorf("payment = %+v", p)
	}
	if loc := resp.Header.Get("Location"); loc != "/payments/"+p.ID {
		t.Errorf("Location = %q", loc)
	}

	resp2, body2 := mustSend(t, srv, "POST", "/payments", "k-1", payBody)
	if resp2.StatusCode != http.StatusCreated || !bytes.Equal(body, body2) {
		t.Errorf("replay: status %d body %s, want 201 %s", resp2.StatusCode, body2, body)
	}
	if resp2.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("replay lacks %s: true", idempotency.HeaderReplayed)
	}

	if got := srv.Executions("k-1"); got != 1 {
		t.Errorf("Executions = %d, want 1", got)
	}
	if got := srv.Attempts("k-1"); got != 2 {
		t.Errorf("Attempts = %d, want 2", got)
	}
	st := srv.Stats("k-1")
	want := []mockserver.Attempt{{Status: 201, Outcome: mockserver.OutcomeExecuted}, {Status: 201, Outcome: mockserver.OutcomeReplayed}}
	if len(st.History) != 2 || untimed(st.History[0]) != want[0] || untimed(st.History[1]) != want[1] {
		t.Errorf("History = %+v, want %+v", st.History, want)
	}
	if got := srv.Balance("eur"); got != 10_000-1250 {
		t.Errorf("Balance = %d, want %d", got, 10_000-1250)
	}

	// The same over HTTP.
	_, list := mustSend(t, srv, "GET", "/payments", "", "")
	ps := decodeJSON[[]mockserver.Payment](t, list)
	if len(ps) != 1 || ps[0].ID != p.ID {
		t.Errorf("GET /payments = %s", list)
	}
	_, one := mustSend(t, srv, "GET", "/payments/"+p.ID, "", "")
	if got := decodeJSON[mockserver.Payment](t, one); got.ID != p.ID {
		t.Errorf("GET /payments/{id} = %s", one)
	}
	resp404, b404 := mustSend(t, srv, "GET", "/payments/pay_nope", "", "")
	wantProblem(t, resp404, b404, 404, mockserver.ProblemNotFound)
	_, bal := mustSend(t, srv, "GET", "/balance", "", "")
	if got := decodeJSON[struct{ Balances map[string]int64 }](t, bal); got.Balances["EUR"] != 10_000-1250 {
		t.Errorf("GET /balance = %s", bal)
	}
	_, bal = mustSend(t, srv, "GET", "/balance?currency=usd", "", "")
	if got := decodeJSON[struct{ Balances map[string]int64 }](t, bal); got.Balances["USD"] != mockserver.DefaultBalance || len(got.Balances) != 1 {
		t.Errorf("GET /balance?currency=usd = %s", bal)
	}
}

func TestValidationIsProblem400(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	tests := []struct {
		key, body string
		fields    []string
	}{
		{"v-1", `{"amount":0,"currency":"EUR","recipient":"a"}`, []string{"amount"}},
		{"v-2", `{"amount":5,"currency":"EURO","recipient":"a"}`, []string{"currency"}},
		{"v-3", `{"amount":5,"currency":"EUR","recipient":""}`, []string{"recipient"}},
		{"v-4", `{}`, []string{"amount", "currency", "recipient"}},
		{"v-5", `not json`, []string{""}},
	}
	for _, tt := range tests {
		resp, body := mustSend(t, srv, "POST", "/payments", tt.key, tt.body)
		p := wantProblem(t, resp, body, http.StatusBadRequest, mockserver.ProblemValidation)
		var fields []string
		for _, e := range p.Errors {
			fields = append(fields, e.Field)
		}
		if strings.Join(fields, ",") != strings.Join(tt.fields, ",") {
			t.Errorf("%s: error fields %q, want %q", tt.body, fields, tt.fields)
		}
		// A 4xx outcome is stored: the retry replays it and nothing runs.
		resp2, body2 := mustSend(t, srv, "POST", "/payments", tt.key, tt.body)
		if resp2.StatusCode != 400 || !bytes.Equal(body, body2) || resp2.Header.Get(idempotency.HeaderReplayed) != "true" {
			t.Errorf("%s: retry got %d %s", tt.body, resp2.StatusCode, body2)
		}
		if got := srv.Executions(tt.key); got != 1 {
			t.Errorf("%s: Executions = %d, want 1", tt.body, got)
		}
	}
	if n := len(srv.Payments()); n != 0 {
		t.Errorf("%d payments after invalid requests", n)
	}
	if got := srv.Balance("EUR"); got != mockserver.DefaultBalance {
		t.Errorf("balance = %d, want untouched", got)
	}
}

func TestContractAnswers(t *testing.T) {
	srv := mockserver.New(mockserver.WithBalance("GBP", 100))
	defer srv.Close()

	resp, body := mustSend(t, srv, "POST", "/payments", "", payBody)
	wantProblem(t, resp, body, http.StatusBadRequest, idempotency.ProblemMissingKey)
	if got := srv.Stats("").Attempts; got != 1 {
		t.Errorf("attempts without a key = %d, want 1", got)
	}

	mustSend(t, srv, "POST", "/payments", "r-1", payBody)
	resp, body = mustSend(t, srv, "POST", "/payments", "r-1", `{"amount":9,"currency":"EUR","recipient":"alice"}`)
	wantProblem(t, resp, body, http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
	if st := srv.Stats("r-1"); st.Executions != 1 || st.History[1].Outcome != mockserver.OutcomeKeyReused {
		t.Errorf("stats = %+v", st)
	}

	resp, body = mustSend(t, srv, "POST", "/payments", "f-1", `{"amount":101,"currency":"GBP","recipient":"bob"}`)
	wantProblem(t, resp, body, http.StatusPaymentRequired, mockserver.ProblemInsufficientFunds)
	if got := srv.Balance("GBP"); got != 100 {
		t.Errorf("GBP balance = %d, want 100", got)
	}
}

func TestFailNext(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	srv.FailNext(2, http.StatusServiceUnavailable)
	srv.FailNext(1, http.StatusInternalServerError)
	if f := srv.Faults(); len(f.Fail) != 3 || f.Fail[2] != 500 {
		t.Errorf("Faults = %+v", f)
	}
	for _, want := range []int{503, 503, 500} {
		resp, body := mustSend(t, srv, "POST", "/payments", "fail-1", payBody)
		wantProblem(t, resp, body, want, mockserver.ProblemInjectedFailure)
		if got := srv.Executions("fail-1"); got != 0 {
			t.Fatalf("an injected failure executed the payment (%d)", got)
		}
	}
	resp, body := mustSend(t, srv, "POST", "/payments", "fail-1", payBody)
	if resp.StatusCode != 201 || resp.Header.Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("after the failures: %d %s", resp.StatusCode, body)
	}
	st := srv.Stats("fail-1")
	if st.Attempts != 4 || st.Executions != 1 {
		t.Errorf("stats = %+v, want 4 attempts, 1 execution", st)
	}
	for i, want := range []mockserver.Outcome{mockserver.OutcomeInjectedFailure, mockserver.OutcomeInjectedFailure,
		mockserver.OutcomeInjectedFailure, mockserver.OutcomeExecuted} {
		if st.History[i].Outcome != want {
			t.Errorf("History[%d] = %+v, want %s", i, st.History[i], want)
		}
	}
	// GET requests are not protected and not failed.
	srv.FailNext(1, 503)
	if resp, _ := mustSend(t, srv, "GET", "/payments", "", ""); resp.StatusCode != 200 {
		t.Errorf("GET /payments = %d while a failure is pending", resp.StatusCode)
	}
	srv.ClearFaults()
	if f := srv.Faults(); len(f.Fail) != 0 {
		t.Errorf("after ClearFaults: %+v", f)
	}
}

func TestFaultArgumentsPanic(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for name, f := range map[string]func(){
		"FailNext status 200": func() { srv.FailNext(1, 200) },
		"FailNext negative":   func() { srv.FailNext(-1, 503) },
		"Drop negative":       func() { srv.DropAfterCommitNext(-1) },
		"Delay negative":      func() { srv.DelayNext(1, -time.Second) },
		"Latency negative":    func() { srv.SetLatency(-time.Second) },
		"WithBalance bad":     func() { mockserver.WithBalance("EURO", 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestDropAfterCommitNext(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	srv.DropAfterCommitNext(1)

	_, _, err := send(t, srv, "POST", "/payments", "drop-1", payBody)
	if err == nil {
		t.Fatal("the dropped request got an answer")
	}
	// The payment happened although the client got no answer.
	if got := srv.Executions("drop-1"); got != 1 {
		t.Fatalf("Executions = %d, want 1", got)
	}
	ps := srv.Payments()
	if len(ps) != 1 {
		t.Fatalf("%d payments, want 1", len(ps))
	}
	resp, body := mustSend(t, srv, "POST", "/payments", "drop-1", payBody)
	if resp.StatusCode != 201 || resp.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Fatalf("retry: %d %s", resp.StatusCode, body)
	}
	if p := decodeJSON[mockserver.Payment](t, body); p.ID != ps[0].ID {
		t.Errorf("retry answered payment %s, want the committed %s", p.ID, ps[0].ID)
	}
	st := srv.Stats("drop-1")
	if st.Executions != 1 || st.Attempts != 2 || untimed(st.History[0]) != (mockserver.Attempt{Status: 0, Outcome: mockserver.OutcomeDropped}) ||
		st.History[1].Outcome != mockserver.OutcomeReplayed {
		t.Errorf("stats = %+v", st)
	}
}

func TestDelayNextMakesDuplicatesMeet409(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	// The duplicate must arrive while the delay runs, also on a loaded
	// machine; the test waits for the delay anyway, so keep it ample.
	srv.DelayNext(1, time.Second)

	type result struct {
		status int
		body   []byte
		err    error
	}
	first := make(chan result, 1)
	go func() {
		resp, b, err := send(t, srv, "POST", "/payments", "slow-1", payBody)
		if err != nil {
			first <- result{err: err}
			return
		}
		first <- result{status: resp.StatusCode, body: b}
	}()
	// The delay is taken once the first request holds the claim.
	testenv.Eventually(t, "the delayed execution starts", func() bool { return len(srv.Faults().Delays) == 0 })

	resp, body := mustSend(t, srv, "POST", "/payments", "slow-1", payBody)
	wantProblem(t, resp, body, http.StatusConflict, idempotency.ProblemInProgress)

	r := <-first
	if r.err != nil || r.status != 201 {
		t.Fatalf("first request: %d %s %v", r.status, r.body, r.err)
	}
	resp, body = mustSend(t, srv, "POST", "/payments", "slow-1", payBody)
	if resp.StatusCode != 201 || !bytes.Equal(body, r.body) {
		t.Errorf("after completion: %d %s", resp.StatusCode, body)
	}
	st := srv.Stats("slow-1")
	if st.Executions != 1 || st.Attempts != 3 {
		t.Errorf("stats = %+v", st)
	}
	outcomes := map[mockserver.Outcome]int{}
	for _, a := range st.History {
		outcomes[a.Outcome]++
	}
	if outcomes[mockserver.OutcomeInProgress] != 1 || outcomes[mockserver.OutcomeExecuted] != 1 || outcomes[mockserver.OutcomeReplayed] != 1 {
		t.Errorf("History = %+v", st.History)
	}
}

func TestLatencyDelaysAPIRequests(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	srv.SetLatency(40 * time.Millisecond)
	start := time.Now()
	mustSend(t, srv, "GET", "/balance", "", "")
	if el := time.Since(start); el < 40*time.Millisecond {
		t.Errorf("GET /balance took %v with 40ms latency", el)
	}
	if f := srv.Faults(); f.Latency != 40*time.Millisecond || f.LatencyMS != 40 {
		t.Errorf("Faults = %+v", f)
	}
	srv.SetLatency(0)
	if f := srv.Faults(); f.Latency != 0 {
		t.Errorf("latency not removed: %+v", f)
	}
}

func TestExpireKeys(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	_, b1 := mustSend(t, srv, "POST", "/payments", "exp-1", payBody)
	srv.ExpireKeys()
	resp, b2 := mustSend(t, srv, "POST", "/payments", "exp-1", payBody)
	if resp.StatusCode != 201 || resp.Header.Get(idempotency.HeaderReplayed) != "" {
		t.Fatalf("after ExpireKeys: %d %s", resp.StatusCode, b2)
	}
	if decodeJSON[mockserver.Payment](t, b1).ID == decodeJSON[mockserver.Payment](t, b2).ID {
		t.Error("the expired key replayed the old payment")
	}
	if got := srv.Executions("exp-1"); got != 2 {
		t.Errorf("Executions = %d, want 2 after expiry", got)
	}
	// Another payload with the expired key is new too, not 422.
	srv.ExpireKeys()
	resp, body := mustSend(t, srv, "POST", "/payments", "exp-1", `{"amount":1,"currency":"EUR","recipient":"z"}`)
	if resp.StatusCode != 201 {
		t.Errorf("new payload after expiry: %d %s", resp.StatusCode, body)
	}
}

func TestReset(t *testing.T) {
	srv := mockserver.New(mockserver.WithBalance("EUR", 5000))
	defer srv.Close()
	mustSend(t, srv, "POST", "/payments", "reset-1", payBody)
	srv.FailNext(1, 503)
	srv.Reset()
	if n, bal, keys, f := len(srv.Payments()), srv.Balance("EUR"), len(srv.Keys()), srv.Faults(); n != 0 || bal != 5000 || keys != 0 || len(f.Fail) != 0 {
		t.Errorf("after Reset: %d payments, balance %d, %d keys, faults %+v", n, bal, keys, f)
	}
	resp, _ := mustSend(t, srv, "POST", "/payments", "reset-1", payBody)
	if resp.StatusCode != 201 || resp.Header.Get(idempotency.HeaderReplayed) != "" {
		t.Errorf("the key survived Reset: %d", resp.StatusCode)
	}
}

func TestCloseWaitsForInFlightRequests(t *testing.T) {
	srv := mockserver.New()
	srv.DelayNext(1, 200*time.Millisecond)
	done := make(chan error, 1)
	go func() {
		resp, b, err := send(t, srv, "POST", "/payments", "close-1", payBody)
		if err == nil && resp.StatusCode != 201 {
			err = errors.New("status " + resp.Status + ": " + string(b))
		}
		done <- err
	}()
	testenv.Eventually(t, "the delayed execution starts", func() bool { return len(srv.Faults().Delays) == 0 })
	srv.Close()
	// The execution is counted after the delay: Close waited for it.
	if got := srv.Executions("close-1"); got != 1 {
		t.Errorf("Executions = %d right after Close, want 1", got)
	}
	if err := <-done; err != nil {
		t.Errorf("in-flight request during Close: %v", err)
	}
	srv.Close() // a second Close is harmless
}

func TestConcurrentDuplicatesExecuteOnce(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	const keys, dup = 10, 8
	var wg sync.WaitGroup
	for k := range keys {
		key := "conc-" + string(rune('a'+k))
		for range dup {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, _, err := send(t, srv, "POST", "/payments", key, payBody); err != nil {
					t.Errorf("%s: %v", key, err)
				}
			}()
		}
	}
	wg.Wait()
	for _, st := range srv.Keys() {
		if st.Executions != 1 || st.Attempts != dup {
			t.Errorf("%s: %d executions, %d attempts; want 1, %d", st.Key, st.Executions, st.Attempts, dup)
		}
	}
	if got := srv.Balance("EUR"); got != mockserver.DefaultBalance-keys*1250 {
		t.Errorf("balance = %d, want %d", got, mockserver.DefaultBalance-keys*1250)
	}
}

func TestIdempotencyOptionsPassThrough(t *testing.T) {
	// With a wait for the result, a duplicate of a slow execution gets the
	// replay instead of 409.
	srv := mockserver.New(mockserver.WithIdempotencyOptions(idempotency.WithWaitForResult(5 * time.Second)))
	defer srv.Close()
	srv.DelayNext(1, 100*time.Millisecond)
	first := make(chan error, 1)
	go func() {
		_, _, err := send(t, srv, "POST", "/payments", "wait-1", payBody)
		first <- err
	}()
	testenv.Eventually(t, "the delayed execution starts", func() bool { return len(srv.Faults().Delays) == 0 })
	resp, body := mustSend(t, srv, "POST", "/payments", "wait-1", payBody)
	if resp.StatusCode != 201 || resp.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("duplicate with WithWaitForResult: %d %s", resp.StatusCode, body)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := srv.Executions("wait-1"); got != 1 {
		t.Errorf("Executions = %d", got)
	}
}

// txSpy is a TxStore whose transactional side must never be used by the
// mock server, whose ledger lives outside any transaction.
type txSpy struct {
	*memstore.Store
	began atomic.Int32
}

func (s *txSpy) BeginTx(context.Context) (idempotency.Tx, error) {
	s.began.Add(1)
	return nil, errors.New("txSpy: no transactions here")
}

var _ idempotency.TxStore = (*txSpy)(nil)

func TestTxStoreIsUsedInLeaseMode(t *testing.T) {
	spy := &txSpy{Store: memstore.New()}
	defer spy.Close()
	srv := mockserver.New(mockserver.WithStore(spy))
	defer srv.Close()
	if srv.Store() != idempotency.Store(spy) {
		t.Error("Store() does not return the store given to WithStore")
	}
	resp, body := mustSend(t, srv, "POST", "/payments", "tx-1", payBody)
	if resp.StatusCode != 201 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if n := spy.began.Load(); n != 0 {
		t.Errorf("BeginTx called %d times", n)
	}
	if _, found, err := spy.Get(context.Background(), idempotency.Key{Scope: "mockserver/epoch-0", Key: "tx-1"}); err != nil || !found {
		t.Errorf("the entry is not in the given store under the default scope: found %v, err %v", found, err)
	}
}

func TestWithNamespaceSeparatesServersOnOneStore(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	a := mockserver.New(mockserver.WithStore(st), mockserver.WithNamespace("team-a"))
	defer a.Close()
	b := mockserver.New(mockserver.WithStore(st), mockserver.WithNamespace("team-b"))
	defer b.Close()
	mustSend(t, a, "POST", "/payments", "ns-1", payBody)
	resp, _ := mustSend(t, b, "POST", "/payments", "ns-1", payBody)
	if resp.StatusCode != 201 || resp.Header.Get(idempotency.HeaderReplayed) != "" {
		t.Errorf("another namespace replayed the key: %d", resp.StatusCode)
	}
	if a.Executions("ns-1") != 1 || b.Executions("ns-1") != 1 {
		t.Errorf("executions a %d, b %d; want 1 each", a.Executions("ns-1"), b.Executions("ns-1"))
	}
}

func TestWithLoggerReportsFaultsAndExecutions(t *testing.T) {
	var buf testkit.SyncBuffer
	srv := mockserver.New(mockserver.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	defer srv.Close()
	srv.FailNext(1, 503)
	srv.DropAfterCommitNext(1)
	send(t, srv, "POST", "/payments", "log-1", payBody)
	send(t, srv, "POST", "/payments", "log-1", payBody)
	out := buf.String()
	for _, want := range []string{"injected failure", "payment executed", "dropped the answer after commit", "key=log-1"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

func TestNilOptionIgnored(t *testing.T) {
	srv := mockserver.New(nil, mockserver.WithNamespace("nil-option"), nil)
	defer srv.Close()
	if resp, _ := mustSend(t, srv, "POST", "/payments", "nil-1", payBody); resp.StatusCode != http.StatusCreated {
		t.Errorf("POST = %d, want 201", resp.StatusCode)
	}
}

// untimed is how a was answered, without its timing, which differs on
// every run.
func untimed(a mockserver.Attempt) mockserver.Attempt {
	return mockserver.Attempt{Status: a.Status, Outcome: a.Outcome}
}

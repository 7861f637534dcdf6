package mockserver_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/mockserver"
)

// TestPaymentMediaTypeRetryDoesNotTakeOver: a retry with a refused media
// type (the same body and Content-Type, with a Content-Encoding, so the
// same fingerprint) of a payment whose claim is in progress with a lapsed
// lease (its instance paused, its keeper late) must not take the claim
// over: taken over and released, it left the first request's token stale,
// so the payment that request made was never recorded, and the next retry
// of the paid key was answered 415. The refused retry is answered without
// a claim, the first request's 201 is stored, and the retry after it is
// the 201 replayed.
func TestPaymentMediaTypeRetryDoesNotTakeOver(t *testing.T) {
	p := startHeldPayment(t, "lapsed")
	p.skew.Store(int64(time.Minute)) // past the lease (10 s), within the TTL
	h := http.Header{"Idempotency-Key": {"lapsed"}, "Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	resp, b := sendHeaders(t, p.srv, h, payBody)
	if resp.StatusCode < 400 || resp.StatusCode == http.StatusUnsupportedMediaType {
		t.Errorf("refused retry while the claim's lease lapsed: %d %s; want an error that is not 415", resp.StatusCode, b)
	}
	p.finish(t, h)
}

// TestPaymentMediaTypeWaiterDoesNotTakeOver: under
// idempotency.WithWaitForResult, a retry with a refused media type of a
// payment in progress waits for it in the idempotency Middleware, as any
// retry, but its wait, which claims the key again as it polls, must not
// take the claim over when the lease lapses meanwhile: taken over and
// released, the first request, which paid, could not record its 201 (its
// token stale, it was answered 409), and the next retry of the paid key
// was answered 415, "neither run nor stored". The waiting retry gets the
// first request's 201, replayed, once it is stored.
func TestPaymentMediaTypeWaiterDoesNotTakeOver(t *testing.T) {
	p := startHeldPayment(t, "waited", mockserver.WithIdempotencyOptions(idempotency.WithWaitForResult(5*time.Second)))
	h := http.Header{"Idempotency-Key": {"waited"}, "Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	type answer struct {
		resp *http.Response
		body []byte
	}
	waiter := make(chan answer, 1)
	go func() {
		resp, b := sendHeaders(t, p.srv, h, payBody)
		waiter <- answer{resp, b}
	}()
	var got answer
	select {
	case got = <-waiter:
		t.Errorf("refused retry of a payment in progress answered without waiting: %d %s", got.resp.StatusCode, got.body)
	case <-time.After(100 * time.Millisecond): // waiting in the Middleware
	}
	p.skew.Store(int64(time.Minute))  // past the lease (10 s), within the TTL, while it waits and polls
	time.Sleep(50 * time.Millisecond) // a few of its polls (10 ms, doubling)
	p.finish(t, h)
	if got.resp == nil {
		got = <-waiter
	}
	if got.resp.StatusCode != http.StatusCreated || got.resp.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("refused retry that waited for the payment: %d (%s %q) %s; want its 201 replayed",
			got.resp.StatusCode, idempotency.HeaderReplayed, got.resp.Header.Get(idempotency.HeaderReplayed), got.body)
	}
}

// flakyGetStore is a Store whose Get fails once fail is set (clearing it),
// and answers otherwise.
type flakyGetStore struct {
	idempotency.Store
	fail *atomic.Bool
}

func (s flakyGetStore) Get(ctx context.Context, k idempotency.Key) (idempotency.Entry, bool, error) {
	if s.fail.CompareAndSwap(true, false) {
		return idempotency.Entry{}, false, errDown
	}
	return s.Store.Get(ctx, k)
}

// TestPaymentMediaTypeRetryUnlookedDoesNotTakeOver: a retry with a refused
// media type whose key could not be looked up (the store failed that Get
// and answers the next call) must not take over the claim of the payment
// in progress whose lease lapsed: passed to the Middleware, whose Claim
// took it over, it was answered 503 and its claim released, so the first
// request, which paid, could not record its 201, and the next retry of the
// paid key was answered 415, "neither run nor stored". The retry is
// answered without a claim, and the first request's 201 is stored.
func TestPaymentMediaTypeRetryUnlookedDoesNotTakeOver(t *testing.T) {
	fail := new(atomic.Bool)
	p := startHeldPaymentOver(t, "unlooked", func(st idempotency.Store) idempotency.Store { return flakyGetStore{st, fail} })
	p.skew.Store(int64(time.Minute)) // past the lease (10 s), within the TTL
	h := http.Header{"Idempotency-Key": {"unlooked"}, "Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}
	fail.Store(true)
	resp, b := sendHeaders(t, p.srv, h, payBody)
	if resp.StatusCode < 400 || resp.StatusCode == http.StatusUnsupportedMediaType {
		t.Errorf("refused retry, its lookup failed, while the claim's lease lapsed: %d %s; want an error that is not 415", resp.StatusCode, b)
	}
	if fail.Load() {
		t.Error("the store's Get was not called")
	}
	p.finish(t, h)
}

// heldPayment is a payment of key whose first request is held in the
// handler until finish, on a mock server over a memstore whose clock
// skew puts ahead.
type heldPayment struct {
	key     string
	skew    *atomic.Int64 // how far the store's clock is ahead
	srv     *mockserver.Server
	release chan struct{}
	done    chan []byte // the first request's 201 body
}

// startHeldPayment starts the mock server with opts and the first request
// of key, and returns once that request is in the handler.
func startHeldPayment(t *testing.T, key string, opts ...mockserver.Option) *heldPayment {
	t.Helper()
	return startHeldPaymentOver(t, key, nil, opts...)
}

// startHeldPaymentOver is startHeldPayment with the server's memstore
// given to it through wrap, when not nil.
func startHeldPaymentOver(t *testing.T, key string, wrap func(idempotency.Store) idempotency.Store, opts ...mockserver.Option) *heldPayment {
	t.Helper()
	p := &heldPayment{key: key, skew: new(atomic.Int64), release: make(chan struct{}), done: make(chan []byte, 1)}
	ms := memstore.New(memstore.WithClock(func() time.Time { return time.Now().Add(time.Duration(p.skew.Load())) }))
	t.Cleanup(func() { ms.Close() })
	var st idempotency.Store = ms
	if wrap != nil {
		st = wrap(ms)
	}
	entered := make(chan struct{})
	var began atomic.Bool
	opts = append(opts, mockserver.WithStore(st), mockserver.WithHandlerMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if began.CompareAndSwap(false, true) {
				close(entered)
				<-p.release
			}
			next.ServeHTTP(w, r)
		})
	}))
	p.srv = mockserver.New(opts...)
	t.Cleanup(p.srv.Close)
	go func() {
		_, resp, b := sendTyped(t, p.srv, key, []string{"application/json"}, payBody)
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("first attempt: %d %s, want 201", resp.StatusCode, b)
		}
		p.done <- b
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		close(p.release)
		t.Fatal("the first attempt never reached the handler")
	}
	return p
}

// finish lets the first request pay and checks that a retry with header h
// is its 201 replayed, and that key paid once.
func (p *heldPayment) finish(t *testing.T, h http.Header) {
	t.Helper()
	close(p.release)
	first := <-p.done
	if resp, b := sendHeaders(t, p.srv, h, payBody); resp.StatusCode != http.StatusCreated || resp.Header.Get(idempotency.HeaderReplayed) != "true" || string(b) != string(first) {
		t.Errorf("refused retry of the paid key: %d (%s %q) %s; want the first 201 replayed: %s",
			resp.StatusCode, idempotency.HeaderReplayed, resp.Header.Get(idempotency.HeaderReplayed), b, first)
	}
	if n := p.srv.Executions(p.key); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
	if n := len(p.srv.Payments()); n != 1 {
		t.Errorf("%d payments, want 1", n)
	}
}

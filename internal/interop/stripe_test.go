package interop_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stripe/stripe-go/v82"

	"github.com/saferetry/saferetry/idempotency"
)

// stripeAPI is a Stripe-shaped POST /v1/customers behind idempotency.Middleware.
// The handler counts its executions and keeps the bodies it wrote; when hold
// is set, the first execution signals entered and waits for hold to close.
type stripeAPI struct {
	executions atomic.Int64
	holdFirst

	mu      sync.Mutex
	written [][]byte
}

func (a *stripeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.executions.Add(1)
	a.wait()
	body := fmt.Appendf(nil, `{"id":"cus_%d","object":"customer","email":%q}`, n, r.PostFormValue("email"))
	a.mu.Lock()
	a.written = append(a.written, body)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func (a *stripeAPI) Written() [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([][]byte(nil), a.written...)
}

// newStripeServer serves api at /v1/customers, protected by the Middleware,
// behind a front that injects faults.
func newStripeServer(t *testing.T, api *stripeAPI) (*httptest.Server, *front) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST /v1/customers", idempotency.Middleware(newStore(t))(api))
	f := newFront(mux)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv, f
}

// newStripeClient returns a stripe.Client whose API backend is srv, with
// retries retries and no sleep between them (stripe-go sleeps half a second
// and more with time.Sleep; SetNetworkRetriesSleep is its own switch for
// tests).
func newStripeClient(t *testing.T, srv *httptest.Server, retries int64) *stripe.Client {
	t.Helper()
	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(srv.URL),
		HTTPClient:        srv.Client(),
		MaxNetworkRetries: stripe.Int64(retries),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	impl, ok := b.(*stripe.BackendImplementation)
	if !ok {
		t.Fatalf("stripe.GetBackendWithConfig returned %T, not *stripe.BackendImplementation", b)
	}
	impl.SetNetworkRetriesSleep(false)
	return stripe.NewClient("sk_test_interop", stripe.WithBackends(&stripe.Backends{
		API: b, Connect: b, Uploads: b, MeterEvents: b,
	}))
}

// stripe-go keys a POST itself and retries a lost answer with the same key:
// the customer is created once and stripe-go gets the stored answer.
func TestStripeGoLostAnswerIsReplayed(t *testing.T) {
	api := &stripeAPI{}
	srv, f := newStripeServer(t, api)
	f.DropNext(1)
	sc := newStripeClient(t, srv, 2)

	cus, err := sc.V1Customers.Create(context.Background(), &stripe.CustomerCreateParams{
		Email: stripe.String("ada@example.com"),
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got := api.executions.Load(); got != 1 {
		t.Fatalf("handler ran %d times, want 1", got)
	}
	if cus.ID != "cus_1" || cus.Email != "ada@example.com" {
		t.Errorf("customer = %q %q, want cus_1 ada@example.com", cus.ID, cus.Email)
	}
	if got := cus.LastResponse.Header.Get(idempotency.HeaderReplayed); got != "true" {
		t.Errorf("%s = %q, want true: the answer stripe-go got should be the replay", idempotency.HeaderReplayed, got)
	}
	if w := api.Written(); len(w) != 1 || !bytes.Equal(cus.LastResponse.RawJSON, w[0]) {
		t.Errorf("stripe-go got %s, the handler wrote %s", cus.LastResponse.RawJSON, w)
	}
	requireOneKey(t, f.Seen(), 2)
}

// stripe-go reads an error answer as a Stripe error only when its body has
// Stripe's {"error": {...}} shape; a problem+json answer is a plain error to
// it, and it retries every plain error up to MaxNetworkRetries. So it retries
// the Middleware's 409 in progress (right) and also its 422 key reused
// (needless: each retry is answered 422 again and nothing runs). The handler
// runs once throughout, and the retry after the first finished is a replay.
func TestStripeGoRetriesProblemAnswers(t *testing.T) {
	api := &stripeAPI{holdFirst: holdFirst{hold: make(chan struct{}), entered: make(chan struct{})}}
	srv, f := newStripeServer(t, api)
	// Released before the server closes (cleanups run last in, first out),
	// so that a failing test does not wait on the held request forever.
	release := sync.OnceFunc(func() { close(api.hold) })
	t.Cleanup(release)
	const retries = 2
	sc := newStripeClient(t, srv, retries)
	ctx := context.Background()
	params := func(email string) *stripe.CustomerCreateParams {
		p := &stripe.CustomerCreateParams{Email: stripe.String(email)}
		p.SetIdempotencyKey("create-ada")
		return p
	}

	first := make(chan error, 1)
	go func() {
		_, err := sc.V1Customers.Create(ctx, params("ada@example.com"))
		first <- err
	}()
	<-api.entered

	_, err := sc.V1Customers.Create(ctx, params("ada@example.com"))
	requirePlainProblem(t, err, idempotency.ProblemInProgress)
	if got := len(f.Seen()); got != 1+(1+retries) {
		t.Errorf("server saw %d requests, want the first and %d of the duplicate: stripe-go retries a 409", got, 1+retries)
	}

	release()
	if err := <-first; err != nil {
		t.Fatalf("first Create: %v", err)
	}

	before := len(f.Seen())
	_, err = sc.V1Customers.Create(ctx, params("grace@example.com"))
	requirePlainProblem(t, err, idempotency.ProblemKeyReused)
	if got := len(f.Seen()) - before; got != 1+retries {
		t.Errorf("the key reuse took %d requests, want %d: stripe-go retries a problem+json 422 too", got, 1+retries)
	}

	cus, err := sc.V1Customers.Create(ctx, params("ada@example.com"))
	if err != nil {
		t.Fatalf("Create after the first finished: %v", err)
	}
	if cus.ID != "cus_1" || cus.LastResponse.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("got %s (replayed %q), want the replay of cus_1", cus.LastResponse.RawJSON,
			cus.LastResponse.Header.Get(idempotency.HeaderReplayed))
	}
	if got := api.executions.Load(); got != 1 {
		t.Errorf("handler ran %d times, want 1", got)
	}
}

// requirePlainProblem checks that err is what stripe-go makes of a
// problem+json answer: not a *stripe.Error, its text the problem document.
func requirePlainProblem(t *testing.T, err error, problemType string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want the problem %s", problemType)
	}
	var se *stripe.Error
	if errors.As(err, &se) {
		t.Errorf("err is a *stripe.Error (%v); stripe-go is expected to see a problem+json as a plain error", se)
	}
	if !strings.Contains(err.Error(), problemType) {
		t.Errorf("err = %v, want the problem %s", err, problemType)
	}
}

package otelsaferetry_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/otelsaferetry"
)

// TestNewClient records Client.Do's operations and keeps what Client.Do
// does: the *APIError of a final error status, with the operation's key
// and attempt count.
func TestNewClient(t *testing.T) {
	r := newRig(t)
	srv := newScript(t, 503, 422)
	c := otelsaferetry.NewClient(nil, r.options()...)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("debit"))
	resp, err := c.Do(req)
	var apiErr *saferetry.APIError
	if resp != nil || !errors.As(err, &apiErr) || !errors.Is(err, saferetry.ErrKeyReused) {
		t.Fatalf("Do: %v, %v; want the 422's *APIError", resp, err)
	}
	_, keys := srv.seen()
	if apiErr.Attempts != 2 || apiErr.Key == "" || apiErr.Key != keys[0] {
		t.Errorf("APIError: %d attempts, key %q; want 2 and the key sent, %q", apiErr.Attempts, apiErr.Key, keys[0])
	}
	kinds := map[trace.SpanKind]int{}
	for _, s := range r.spans.Ended() {
		kinds[s.SpanKind()]++
	}
	if kinds[trace.SpanKindInternal] != 1 || kinds[trace.SpanKindClient] != 2 {
		t.Errorf("spans ended: %v, want 1 operation and 2 attempts", kinds)
	}
	if got := sum(t, r.collect(t), otelsaferetry.MetricAttempts, kvs("4xx", "return", "final status")...); got != 1 {
		t.Errorf("final 422 attempts: %d, want 1", got)
	}
}

// TestConcurrent runs operations on one Transport from several goroutines
// (under -race, the proof of "safe for concurrent use") and counts them
// all.
func TestConcurrent(t *testing.T) {
	r := newRig(t)
	srv := newScript(t, 201)
	rt := otelsaferetry.NewTransport(nil, r.options()...)
	const n = 16
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if status, err := post(t, context.Background(), rt, srv.URL); err != nil || status != 201 {
				t.Errorf("got %d, %v; want 201", status, err)
			}
		})
	}
	wg.Wait()
	ms := r.collect(t)
	if got := sum(t, ms, otelsaferetry.MetricAttempts); got != n {
		t.Errorf("attempts = %d, want %d", got, n)
	}
	if c, _ := histogram(t, ms, otelsaferetry.MetricOperationDuration); c != n {
		t.Errorf("operations = %d, want %d", c, n)
	}
	if got := len(r.spans.Ended()); got != 2*n {
		t.Errorf("%d spans ended, want %d", got, 2*n)
	}
}

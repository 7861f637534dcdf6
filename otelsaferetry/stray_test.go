package otelsaferetry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/otelsaferetry"
)

// A request made on the context of a call's response and sent through
// Client.Transport() (which skips the operation layer) is no attempt of
// the call's operation: it makes no span (as NewClient says), not a client
// span of the ended operation with a resend count. Found by a review
// helper.
func TestStrayAfterTheCallMakesNoSpan(t *testing.T) {
	r := newRig(t)
	srv := newScript(t, 201)
	c := otelsaferetry.NewClient(nil, r.options()...)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/debits", strings.NewReader("debit"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	before := len(r.spans.Ended())
	stray, _ := http.NewRequestWithContext(resp.Request.Context(), http.MethodPost, srv.URL+"/v1/audit", strings.NewReader("audit"))
	sresp, err := c.Transport().RoundTrip(stray)
	if err != nil {
		t.Fatal(err)
	}
	sresp.Body.Close()
	for _, s := range r.spans.Ended()[before:] {
		t.Errorf("the request sent through Client.Transport() after the call made span %q", s.Name())
	}
	if started, ended := len(r.spans.Started()), len(r.spans.Ended()); started != ended {
		t.Errorf("%d spans started, %d ended", started, ended)
	}
}

// A hook's goroutine that sends a request on its attempt's context
// through Client.Transport() while the call goes on (to its retry) leaves
// the call's operation alone: the operation is used by the call's
// goroutine only (-race), and the call's spans are its own two attempts.
func TestStrayDuringTheCallLeavesItsOperation(t *testing.T) {
	r := newRig(t)
	srv := newScript(t, 503, 201)
	var wg sync.WaitGroup
	var c *saferetry.Client
	var once sync.Once
	c = otelsaferetry.NewClient(nil, r.options(otelsaferetry.WithRetryOptions(saferetry.WithHook(func(a saferetry.Attempt) {
		if !strings.HasSuffix(a.Request.URL.Path, "/v1/debits") {
			return
		}
		once.Do(func() {
			wg.Add(1)
			go func(ctx context.Context) {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/audit", strings.NewReader("audit"))
				if resp, err := c.Transport().RoundTrip(req); err == nil {
					resp.Body.Close()
				}
			}(a.Request.Context())
		})
	})))...)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/debits", strings.NewReader("debit"))
	resp, err := c.Do(req)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	attempts := 0
	for _, s := range r.spans.Ended() {
		if s.Parent().IsValid() {
			attempts++
		}
	}
	if attempts != 2 {
		t.Errorf("the call's operation has %d attempt spans, want its own 2 (the stray makes none)", attempts)
	}
}

// A key kept after an operation that failed (to reconcile it later) keeps
// no more than the operation: not the body the Transport buffered, which
// the instrumentation held through the last attempt's request. Found by
// a review helper.
func TestKeptKeyHoldsNoBody(t *testing.T) {
	const size = 1 << 20
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		_, _ = io.Copy(io.Discard, r.Body)
		return nil, errors.New("connection reset")
	})
	r := newRig(t)
	tr := otelsaferetry.NewTransport(base, r.options(otelsaferetry.WithRetryOptions(saferetry.WithMaxAttempts(1)))...)
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	var keys []string
	before := heap()
	for range 8 {
		// A body without GetBody, which the Transport buffers.
		req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/debits", io.MultiReader(bytes.NewReader(make([]byte, size))))
		_, err := tr.RoundTrip(req)
		var e *saferetry.Error
		if !errors.As(err, &e) || e.Key == "" {
			t.Fatalf("err = %v, want an *Error with a key", err)
		}
		keys = append(keys, e.Key)
	}
	if grew := heap() - before; grew > 4*size {
		t.Errorf("8 kept keys hold %d KiB; want far less than their 8 bodies of 1 MiB", grew>>10)
	}
	runtime.KeepAlive(keys)
}

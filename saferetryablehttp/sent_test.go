package saferetryablehttp

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestWrittenThenRedialRefusedIsOutcomeUnknown: a keyed POST written on a
// reused connection and executed, the server then down before it answers;
// net/http's own retry on a new connection is refused. The adapter must
// report ErrOutcomeUnknown, not ErrNotSent, with a body and without one,
// over net/http's Transport and over bases that send a body and GetBody of
// their own (see retrypolicy.Written). Found by review helpers.
func TestWrittenThenRedialRefusedIsOutcomeUnknown(t *testing.T) {
	bases := map[string]func(*http.Transport) http.RoundTripper{
		"net/http":   func(h *http.Transport) http.RoundTripper { return h },
		"signing":    func(h *http.Transport) http.RoundTripper { return testkit.SigningBase{Next: h} },
		"registered": testkit.RegisteredSigning,
	}
	for name, body := range map[string]func() any{
		"body": func() any { return strings.NewReader(`{"amount":1500}`) },
		"none": func() any { return nil },
	} {
		for baseName, base := range bases {
			t.Run(name+"/"+baseName, func(t *testing.T) {
				url, executed := testkit.ExecuteThenGoDown(t)
				h := &http.Transport{}
				defer h.CloseIdleConnections()
				testkit.WarmUp(t, h, url)
				c := retryablehttp.NewClient()
				c.Logger = nil
				c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, 2*time.Millisecond
				c.HTTPClient = &http.Client{Transport: base(h)}
				Configure(c)
				req, _ := retryablehttp.NewRequest(http.MethodPost, url+"/payments", body())
				resp, err := c.Do(req)
				if resp != nil {
					resp.Body.Close()
				}
				if executed.Load() != 1 {
					t.Fatalf("executions = %d, want 1 (err = %v)", executed.Load(), err)
				}
				if !errors.Is(err, saferetry.ErrOutcomeUnknown) || errors.Is(err, saferetry.ErrNotSent) {
					t.Errorf("the server executed the payment, yet err = %v", err)
				}
			})
		}
	}
}

// TestRefusedBeforeSendingIsFinal: a request net/http refuses before
// sending it (an invalid header value) is tried once and reported as
// ErrNotSent, not retried to the limit as a request that may have been
// sent. Found by a review helper.
func TestRefusedBeforeSendingIsFinal(t *testing.T) {
	url, got := testkit.CountingServer(t)
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, 2*time.Millisecond
	var tries atomic.Int32
	c.RequestLogHook = func(retryablehttp.Logger, *http.Request, int) { tries.Add(1) }
	Configure(c)
	req, _ := retryablehttp.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	req.Header.Set("X-Note", "a\r\nb")
	resp, err := c.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	if !errors.Is(err, saferetry.ErrNotSent) || tries.Load() != 1 || got.Load() != 0 {
		t.Errorf("err = %v after %d tries (%d reached the server); want ErrNotSent after 1 try", err, tries.Load(), got.Load())
	}
}

package saferetryablehttp

import (
	"errors"
	"io"
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
// report ErrOutcomeUnknown, not ErrNotSent, with a body (told by GetBody)
// and without one (told by a connection trace). Found by a review helper.
func TestWrittenThenRedialRefusedIsOutcomeUnknown(t *testing.T) {
	for name, body := range map[string]any{"body": strings.NewReader(`{"amount":1500}`), "none": nil} {
		t.Run(name, func(t *testing.T) {
			url, executed := testkit.ExecuteThenGoDown(t)
			c := retryablehttp.NewClient()
			c.Logger = nil
			c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, 2*time.Millisecond
			c.HTTPClient = &http.Client{Transport: &http.Transport{}}
			Configure(c)
			defer c.HTTPClient.CloseIdleConnections()
			resp, err := c.Get(url) // leaves a keep-alive connection to reuse
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			req, _ := retryablehttp.NewRequest(http.MethodPost, url+"/payments", body)
			resp, err = c.Do(req)
			if resp != nil {
				resp.Body.Close()
			}
			if executed.Load() != 1 {
				t.Fatalf("executions = %d, want 1", executed.Load())
			}
			if !errors.Is(err, saferetry.ErrOutcomeUnknown) || errors.Is(err, saferetry.ErrNotSent) {
				t.Errorf("the server executed the payment, yet err = %v", err)
			}
		})
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

package saferetryablehttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestCutAnswerServerChild is the cut-answer server of the child processes
// that the cut-answer tests start; it does nothing in the parent.
func TestCutAnswerServerChild(t *testing.T) { testkit.ServeCutChild() }

// cutClient returns a configured retryablehttp client on a base of its
// own, and the server, killed at mode's point; restart restarts it before
// the first retry.
func cutClient(t *testing.T, mode string, restart bool) (*retryablehttp.Client, **testkit.CutChild, *[]string) {
	srv := testkit.StartCutChild(t, "^TestCutAnswerServerChild$", mode, "127.0.0.1:0", t.TempDir())
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.RetryWaitMin, c.RetryWaitMax, c.RetryMax = time.Millisecond, 4*time.Millisecond, 2
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	c.HTTPClient = &http.Client{Transport: base}
	keys := new([]string)
	c.RequestLogHook = func(_ retryablehttp.Logger, r *http.Request, retry int) {
		*keys = append(*keys, r.Header.Get(saferetry.HeaderIdempotencyKey))
		if retry == 1 && restart {
			srv = srv.Restart()
		}
	}
	Configure(c)
	return c, &srv, keys
}

// TestRetryableKilledBeforeAnswering: see the root package's
// TestKilledBeforeAnswering.
func TestRetryableKilledBeforeAnswering(t *testing.T) {
	t.Run("replayed", func(t *testing.T) {
		c, srv, keys := cutClient(t, testkit.CutBeforeHead, true)
		req, _ := retryablehttp.NewRequest(http.MethodPost, "http://"+(*srv).Addr+"/pay", []byte("debit 1500"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("got %v, want the replay", err)
		}
		testkit.WantReplayedOnce(t, resp, *keys, 2, "debit 1500", (*srv).Executions, "")
	})
	t.Run("down", func(t *testing.T) {
		c, srv, keys := cutClient(t, testkit.CutBeforeHead, false)
		req, _ := retryablehttp.NewRequest(http.MethodPost, "http://"+(*srv).Addr+"/pay", []byte("debit 1500"))
		resp, err := c.Do(req)
		if resp != nil {
			resp.Body.Close()
			t.Fatalf("got a %d answer from a dead server", resp.StatusCode)
		}
		key := testkit.OneKey(t, *keys, 3)
		var e *saferetry.Error
		if !errors.Is(err, saferetry.ErrOutcomeUnknown) || !errors.As(err, &e) || e.Key != key || e.Attempts != 3 {
			t.Errorf("got %v, want ErrOutcomeUnknown with key %q after 3 attempts", err, key)
		}
	})
}

// TestRetryableCutSuccessBodyReasked: see the root package's
// TestCutSuccessBodyReaskedWithItsKey.
func TestRetryableCutSuccessBodyReasked(t *testing.T) {
	for _, mode := range []string{testkit.CutAfterHead, testkit.CutMidBody, testkit.CutChunked} {
		t.Run(mode, func(t *testing.T) {
			c, srv, keys := cutClient(t, mode, false)
			url := "http://" + (*srv).Addr + "/pay"
			req, _ := retryablehttp.NewRequest(http.MethodPost, url, []byte("debit 1500"))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("got %v, want the 201", err)
			}
			_, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			key := testkit.OneKey(t, *keys, 1)
			if k, ok := saferetry.KeyFromResponse(resp); resp.StatusCode != http.StatusCreated || !errors.Is(rerr, io.ErrUnexpectedEOF) || !ok || k != key {
				t.Fatalf("got %d, read error %v, KeyFromResponse %q %v; want a 201 cut short, with key %q", resp.StatusCode, rerr, k, ok, key)
			}
			*srv = (*srv).Restart()
			req, _ = retryablehttp.NewRequestWithContext(saferetry.WithKey(context.Background(), key), http.MethodPost, url, []byte("debit 1500"))
			resp, err = c.Do(req)
			if err != nil {
				t.Fatalf("asked again: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated || resp.Header.Get(saferetry.HeaderReplayed) != "true" {
				t.Errorf("asked again: %d, replayed %q; want the replayed 201", resp.StatusCode, resp.Header.Get(saferetry.HeaderReplayed))
			}
			if ex := (*srv).Executions(); len(ex) != 1 {
				t.Errorf("executions %q, want 1", ex)
			}
		})
	}
}

// TestRetryableCutRedirectHop: a POST redirected by 307 to a hop whose
// server executes it and is killed before answering. The request is sent
// again from its first hop with the same key, and the second hop replays.
func TestRetryableCutRedirectHop(t *testing.T) {
	c, srv, keys := cutClient(t, testkit.CutBeforeHead, true)
	req, _ := retryablehttp.NewRequest(http.MethodPost, "http://"+(*srv).Addr+"/first", []byte("debit 1500"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("got %v, want the replay", err)
	}
	key := testkit.WantReplayedOnce(t, resp, *keys, 2, "debit 1500", (*srv).Executions, "/second")
	if k, _ := saferetry.KeyFromResponse(resp); k != key {
		t.Errorf("KeyFromResponse = %q, want %q", k, key)
	}
}

package saferetryablehttp

import (
	"context"
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

// TestWrappedCheckRetryStops: a CheckRetry of the caller's set around
// Configure's that stops a retry Configure's allowed (and paid) leaves
// no cost spent, with a context that never ends, whether the attempt got
// an answer (returned as it is) or an error, and whatever error the
// wrapper returns with it: the budget of 10 at cost 5 still affords the
// next request its two retries. A request that ends without an answer
// ends in a *saferetry.Error that says the caller's code stopped it
// ([saferetry.ReasonClassifier]), not in no reason, nor in the bare
// attempt error.
func TestWrappedCheckRetryStops(t *testing.T) {
	for _, tt := range []struct {
		name  string
		first testkit.Outcome
		// passAttemptErr: the wrapper returns the attempt's error when it
		// stops, not Configure's CheckRetry's.
		passAttemptErr bool
	}{
		{"after an answer", testkit.Status(http.StatusServiceUnavailable), false},
		{"after a transport error", testkit.Fail(testkit.ErrReset), false},
		{"after a transport error, the attempt's error returned", testkit.Fail(testkit.ErrReset), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(tt.first)
			c := newRetryable(t, rc, WithRetryBudget(10, 5), WithMaxAttempts(4))
			var stop atomic.Bool
			stop.Store(true)
			inner := c.CheckRetry
			c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
				retry, checkErr := inner(ctx, resp, err)
				if !stop.Load() {
					return retry, checkErr
				}
				if tt.passAttemptErr {
					return false, err
				}
				return false, checkErr
			}
			resp, err := c.Do(rhReq(t, context.Background(), http.MethodPost, "x"))
			if tt.first.Err == nil {
				if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
					t.Fatalf("Do: %v, %v; want the 503", resp, err)
				}
				resp.Body.Close()
			} else {
				var e *saferetry.Error
				if !errors.As(err, &e) || !errors.Is(err, saferetry.ErrOutcomeUnknown) || e.Attempts != 1 || e.Key == "" {
					t.Fatalf("Do: %v; want a *saferetry.Error, outcome unknown after 1 attempt, with the key", err)
				}
				if e.Reason != saferetry.ReasonClassifier {
					t.Errorf("Reason = %q, want %q", e.Reason, saferetry.ReasonClassifier)
				}
				if !errors.Is(err, testkit.ErrReset) {
					t.Errorf("Do: %v; want the attempt's error under it", err)
				}
			}
			if n := len(rc.Seen()); n != 1 {
				t.Fatalf("%d attempts, want 1", n)
			}
			stop.Store(false)
			wantTwoRetries(t, c, rc)
		})
	}
}

// TestWrappedCheckRetryStopsAfterClientTimeout: as TestWrappedCheckRetryStops,
// after an attempt that HTTPClient.Timeout cut, whose error net/http made
// its own: the retry that Configure's CheckRetry allowed (and paid, twice
// the cost after a timeout: the whole budget of 10) and a CheckRetry of the
// caller's around it stopped leaves no cost spent, with a context that
// never ends, whatever error the wrapper returns with it (Configure's,
// net/http's, or none): the next request still gets its two retries. The
// request ends, as after a transport error, in a *saferetry.Error that
// says the caller's code stopped it, not in net/http's bare error.
func TestWrappedCheckRetryStopsAfterClientTimeout(t *testing.T) {
	for _, tt := range []struct {
		name string
		ret  func(checkErr, attemptErr error) error // what the wrapper returns when it stops
	}{
		{"Configure's error returned", func(checkErr, _ error) error { return checkErr }},
		{"the attempt's error returned", func(_, attemptErr error) error { return attemptErr }},
		{"no error returned", func(error, error) error { return nil }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Status(http.StatusCreated))
			var stop atomic.Bool
			stop.Store(true)
			c := newRetryableWith(t, rc, func(c *retryablehttp.Client) {
				mock := c.HTTPClient.Transport
				c.HTTPClient.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if !stop.Load() {
						return mock.RoundTrip(r)
					}
					// net/http closes Cancel, for a base it does not
					// know, once it has taken the timeout for its own
					// (the request's context may end first): it then
					// replaces the attempt's error by its own.
					<-r.Cancel
					return nil, context.DeadlineExceeded
				})
			}, WithRetryBudget(10, 5), WithMaxAttempts(4))
			c.HTTPClient.Timeout = 30 * time.Millisecond
			inner := c.CheckRetry
			c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
				retry, checkErr := inner(ctx, resp, err)
				if !stop.Load() {
					return retry, checkErr
				}
				if !retry || !strings.Contains(err.Error(), "Client.Timeout exceeded") {
					t.Errorf("CheckRetry(%v): retry %v; want net/http's timeout, retried", err, retry)
				}
				return false, tt.ret(checkErr, err)
			}
			_, err := c.Do(rhReq(t, context.Background(), http.MethodPost, "x"))
			var e *saferetry.Error
			if !errors.As(err, &e) || !errors.Is(err, saferetry.ErrOutcomeUnknown) || e.Attempts != 1 || e.Key == "" {
				t.Fatalf("Do: %v; want a *saferetry.Error, outcome unknown after 1 attempt, with the key", err)
			}
			if e.Reason != saferetry.ReasonClassifier {
				t.Errorf("Reason = %q, want %q", e.Reason, saferetry.ReasonClassifier)
			}
			if !strings.Contains(err.Error(), "Client.Timeout exceeded") {
				t.Errorf("Do: %v; want net/http's timeout under it", err)
			}
			stop.Store(false)
			c.HTTPClient.Timeout = 0
			wantTwoRetries(t, c, rc)
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

package saferetry_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testkit"
	"github.com/saferetry/saferetry/mockserver"
)

// TestCutAnswerServerChild is the cut-answer server of the child processes
// that the cut-answer tests start; it does nothing in the parent.
func TestCutAnswerServerChild(t *testing.T) { testkit.ServeCutChild() }

const cutChildRun = "^TestCutAnswerServerChild$"

// cutRig is a test's server and client: the client's Transport, or a
// Client on it, sends through a base of its own, whose connections the
// rig closes at the end, and restarts the server (killed at its point)
// from a hook once an attempt is to be retried, when restart is set.
type cutRig struct {
	t        *testing.T
	srv      *testkit.CutChild
	base     *http.Transport
	tr       *saferetry.Transport
	client   *saferetry.Client
	restart  bool
	mu       sync.Mutex
	attempts []saferetry.Attempt
}

func newCutRig(t *testing.T, mode string, restart bool, opts ...saferetry.Option) *cutRig {
	r := &cutRig{t: t, restart: restart, base: &http.Transport{}}
	r.srv = testkit.StartCutChild(t, cutChildRun, mode, "127.0.0.1:0", t.TempDir())
	opts = append([]saferetry.Option{saferetry.WithBackoff(fastBackoff), saferetry.WithBase(r.base), saferetry.WithHook(r.hook)}, opts...)
	r.client = saferetry.NewClient(opts...)
	r.tr = r.client.Transport()
	return r
}

func (r *cutRig) hook(a saferetry.Attempt) {
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	restart := r.restart && a.Decision == saferetry.DecisionRetry
	r.restart = r.restart && !restart
	r.mu.Unlock()
	if restart {
		r.srv = r.srv.Restart()
	}
}

func (r *cutRig) url(path string) string { return "http://" + r.srv.Addr + path }

// keys returns the key of every attempt so far.
func (r *cutRig) keys() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var keys []string
	for _, a := range r.attempts {
		keys = append(keys, a.Request.Header.Get(saferetry.HeaderIdempotencyKey))
	}
	return keys
}

// do sends a POST of body to path through the Transport (viaClient false)
// or Client.Do, with ctx.
func (r *cutRig) do(ctx context.Context, viaClient bool, path, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url(path), strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	if viaClient {
		return r.client.Do(req)
	}
	return r.tr.RoundTrip(req)
}

// checkLeaks fails the test when goroutines outlive it: the servers are
// killed and the connections closed first.
func checkLeaks(t *testing.T) func(*cutRig) {
	before := runtime.NumGoroutine()
	return func(r *cutRig) {
		r.srv.Kill()
		r.base.CloseIdleConnections()
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	}
}

// wantReplayedOnce is testkit.WantReplayedOnce on r's server.
func (r *cutRig) wantReplayedOnce(t *testing.T, resp *http.Response, attempts int, body, execution string) {
	t.Helper()
	testkit.WantReplayedOnce(t, resp, r.keys(), attempts, body, r.srv.Executions, execution)
}

func viaName(viaClient bool) string {
	if viaClient {
		return "Client.Do"
	}
	return "Transport"
}

// TestKilledBeforeAnswering: the server executes the request and is killed
// before it answers. The operation is retried with the same key; a server
// back on the address replays the answer, and one that stays down leaves
// the outcome unknown (never not sent), with the key in the error.
func TestKilledBeforeAnswering(t *testing.T) {
	for _, viaClient := range []bool{false, true} {
		t.Run(viaName(viaClient)+"/replayed", func(t *testing.T) {
			leaks := checkLeaks(t)
			r := newCutRig(t, testkit.CutBeforeHead, true)
			resp, err := r.do(context.Background(), viaClient, "/pay", "debit 1500")
			if err != nil {
				t.Fatalf("got %v, want the replay", err)
			}
			r.wantReplayedOnce(t, resp, 2, "debit 1500", "")
			leaks(r)
		})
		t.Run(viaName(viaClient)+"/down", func(t *testing.T) {
			leaks := checkLeaks(t)
			r := newCutRig(t, testkit.CutBeforeHead, false, saferetry.WithMaxAttempts(3))
			resp, err := r.do(context.Background(), viaClient, "/pay", "debit 1500")
			if resp != nil {
				resp.Body.Close()
				t.Fatalf("got a %d answer from a dead server", resp.StatusCode)
			}
			key := testkit.OneKey(t, r.keys(), 3)
			var e *saferetry.Error
			if !errors.Is(err, saferetry.ErrOutcomeUnknown) || errors.Is(err, saferetry.ErrNotSent) || !errors.As(err, &e) || e.Key != key || e.Attempts != 3 {
				t.Errorf("got %v, want ErrOutcomeUnknown with key %q after 3 attempts", err, key)
			}
			if ex := r.srv.Executions(); len(ex) != 1 {
				t.Errorf("executions %q, want 1", ex)
			}
			leaks(r)
		})
	}
}

// TestCutSuccessBodyReaskedWithItsKey: the server sends a 201's header and
// is killed before its body is whole. The caller gets the 201, its body
// read fails, the key is on the response, and asking again with that key
// gets the replay, without a second execution.
func TestCutSuccessBodyReaskedWithItsKey(t *testing.T) {
	for _, mode := range []string{testkit.CutAfterHead, testkit.CutMidBody, testkit.CutChunked} {
		for _, viaClient := range []bool{false, true} {
			t.Run(mode+"/"+viaName(viaClient), func(t *testing.T) {
				leaks := checkLeaks(t)
				r := newCutRig(t, mode, false)
				resp, err := r.do(context.Background(), viaClient, "/pay", "debit 1500")
				if err != nil {
					t.Fatalf("got %v, want the 201", err)
				}
				b, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				key := testkit.OneKey(t, r.keys(), 1)
				if resp.StatusCode != http.StatusCreated || !errors.Is(rerr, io.ErrUnexpectedEOF) {
					t.Errorf("got %d, body %q and read error %v; want a 201 whose read fails with io.ErrUnexpectedEOF", resp.StatusCode, b, rerr)
				}
				if k, ok := saferetry.KeyFromResponse(resp); !ok || k != key {
					t.Fatalf("KeyFromResponse = %q, %v; want the attempt's key %q", k, ok, key)
				}

				r.srv = r.srv.Restart()
				resp, err = r.do(saferetry.WithKey(context.Background(), key), viaClient, "/pay", "debit 1500")
				if err != nil {
					t.Fatalf("asked again with the key: %v", err)
				}
				b, rerr = io.ReadAll(resp.Body)
				resp.Body.Close()
				if rerr != nil || resp.StatusCode != http.StatusCreated || resp.Header.Get(saferetry.HeaderReplayed) != "true" || string(b) != testkit.CutAnswer("debit 1500", key) {
					t.Errorf("asked again: %d %q (replayed %q, read error %v), want the replayed 201", resp.StatusCode, b, resp.Header.Get(saferetry.HeaderReplayed), rerr)
				}
				if ex := r.srv.Executions(); len(ex) != 1 {
					t.Errorf("executions %q, want 1", ex)
				}
				leaks(r)
			})
		}
	}
}

// TestCutRedirectHop: a POST redirected by 307; the second hop's server
// executes it and is killed before answering, or mid-body. Client.Do
// retries the hop with the first hop's key and gets the replay; a cut
// body's response carries that key, under which the caller asks again.
func TestCutRedirectHop(t *testing.T) {
	t.Run("before answering", func(t *testing.T) {
		leaks := checkLeaks(t)
		r := newCutRig(t, testkit.CutBeforeHead, true)
		resp, err := r.do(context.Background(), true, "/first", "debit 1500")
		if err != nil {
			t.Fatalf("got %v, want the replay", err)
		}
		r.wantReplayedOnce(t, resp, 3, "debit 1500", "/second")
		leaks(r)
	})
	t.Run("before answering, body without GetBody", func(t *testing.T) {
		leaks := checkLeaks(t)
		r := newCutRig(t, testkit.CutBeforeHead, true)
		req, err := http.NewRequest(http.MethodPost, r.url("/first"), opaqueBody{strings.NewReader("debit 1500")})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := r.client.Do(req)
		if err != nil {
			t.Fatalf("got %v, want the replay", err)
		}
		r.wantReplayedOnce(t, resp, 3, "debit 1500", "/second")
		leaks(r)
	})
	t.Run("mid-body", func(t *testing.T) {
		leaks := checkLeaks(t)
		r := newCutRig(t, testkit.CutMidBody, false)
		resp, err := r.do(context.Background(), true, "/first", "debit 1500")
		if err != nil {
			t.Fatalf("got %v, want the 201", err)
		}
		_, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		key := testkit.OneKey(t, r.keys(), 2)
		if k, ok := saferetry.KeyFromResponse(resp); !ok || k != key || !errors.Is(rerr, io.ErrUnexpectedEOF) {
			t.Fatalf("KeyFromResponse = %q, %v, read error %v; want key %q and io.ErrUnexpectedEOF", k, ok, rerr, key)
		}
		r.srv = r.srv.Restart()
		resp, err = r.do(saferetry.WithKey(context.Background(), key), true, "/first", "debit 1500")
		if err != nil {
			t.Fatalf("asked again: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || resp.Header.Get(saferetry.HeaderReplayed) != "true" {
			t.Errorf("asked again: %d, replayed %q; want the replayed 201", resp.StatusCode, resp.Header.Get(saferetry.HeaderReplayed))
		}
		if ex := r.srv.Executions(); len(ex) != 1 {
			t.Errorf("executions %q, want 1", ex)
		}
		leaks(r)
	})
}

// TestCutMidUpload: a body without GetBody, buffered, whose upload the
// server's death cuts. It is sent again with the same key and executed
// once; a body too large to buffer is not retried and the outcome is
// unknown.
func TestCutMidUpload(t *testing.T) {
	payload := strings.Repeat("x", 256<<10)
	send := func(r *cutRig) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPost, r.url("/pay"), opaqueBody{strings.NewReader(payload)})
		if err != nil {
			t.Fatal(err)
		}
		return r.tr.RoundTrip(req)
	}
	t.Run("buffered", func(t *testing.T) {
		leaks := checkLeaks(t)
		r := newCutRig(t, testkit.CutMidUpload, true)
		resp, err := send(r)
		if err != nil {
			t.Fatalf("got %v, want the 201", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		key := testkit.OneKey(t, r.keys(), 2)
		if resp.StatusCode != http.StatusCreated || string(b) != testkit.CutAnswer(payload, key) {
			t.Errorf("got %d (%d bytes), want the 201", resp.StatusCode, len(b))
		}
		if ex := r.srv.Executions(); len(ex) != 1 {
			t.Errorf("executions %q, want 1", ex)
		}
		leaks(r)
	})
	t.Run("too large to buffer", func(t *testing.T) {
		leaks := checkLeaks(t)
		r := newCutRig(t, testkit.CutMidUpload, false, saferetry.WithMaxBufferedBody(1<<10))
		resp, err := send(r)
		if resp != nil {
			resp.Body.Close()
			t.Fatalf("got a %d answer", resp.StatusCode)
		}
		key := testkit.OneKey(t, r.keys(), 1)
		var e *saferetry.Error
		if !errors.Is(err, saferetry.ErrOutcomeUnknown) || !errors.As(err, &e) || e.Key != key {
			t.Errorf("got %v, want ErrOutcomeUnknown with key %q", err, key)
		}
		leaks(r)
	})
}

// opaqueBody is a request body without GetBody.
type opaqueBody struct{ io.Reader }

func (opaqueBody) Close() error { return nil }

// TestMockServerDropAfterCommit: the reference server's own fault, an
// answer dropped after the payment committed. A buffered answer is
// swallowed whole: the Client retries under the key and gets the replay.
// An answer over the middleware's limit, which streams and is not kept,
// is cut (here before its header left the server's buffer, so that the
// attempt gets no answer): the retry under the key learns that the payment happened
// (410, ProblemResponseTooLarge, the key in the APIError), never runs it
// again, and is not reported as a failure without an answer.
func TestMockServerDropAfterCommit(t *testing.T) {
	const pay = `{"amount":1500,"currency":"EUR","recipient":"user_42"}`
	for _, oversize := range []bool{false, true} {
		var opts []mockserver.Option
		if oversize {
			opts = append(opts, mockserver.WithIdempotencyOptions(idempotency.WithMaxResponseBody(16)))
		}
		srv := mockserver.New(opts...)
		srv.DropAfterCommitNext(1)
		c := saferetry.NewClient(saferetry.WithHTTPClient(srv.Client()), saferetry.WithBackoff(fastBackoff))
		req, _ := http.NewRequestWithContext(saferetry.WithKey(context.Background(), "drop-1"), http.MethodPost, srv.URL+"/payments", strings.NewReader(pay))
		resp, err := c.Do(req)
		var ae *saferetry.APIError
		switch {
		case !oversize && (err != nil || resp.StatusCode != http.StatusCreated || resp.Header.Get(saferetry.HeaderReplayed) != "true"):
			t.Errorf("dropped answer: %v, %v; want the replayed 201", resp, err)
		case oversize && (!errors.As(err, &ae) || ae.StatusCode != http.StatusGone || ae.Key != "drop-1" || ae.Attempts != 2 ||
			ae.Problem == nil || ae.Problem.Type != idempotency.ProblemResponseTooLarge || errors.Is(err, saferetry.ErrOutcomeUnknown)):
			t.Errorf("streamed answer cut short: %v, %v; want the 410 (response too large) under key drop-1 after 2 attempts", resp, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
		if n := srv.Executions("drop-1"); n != 1 {
			t.Errorf("oversize %v: %d executions, want 1", oversize, n)
		}
		srv.Close()
	}
}

package saferetry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/saferetry/saferetry/internal/testkit"
)

// The tests of this file: which requests are the hops of a Client.Do
// call, and so carry the key it pins (see callContext.enter). Each is a
// case a review helper found.

// hopBase answers /v1/debits with a 307 to /v2/debits (after failDebits
// resets), /v2/debits and /v1/audit with a 201 (the audit with auditErr
// when set), and records the key of every round trip by path. onAudit and onV2 run first when set.
// It is safe for concurrent use.
type hopBase struct {
	mu         sync.Mutex
	keys       map[string][]string
	onAudit    func()
	onV2       func()
	auditErr   error
	failDebits int // fail this many /v1/debits round trips first (a reset)
}

func (b *hopBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	b.mu.Lock()
	if b.keys == nil {
		b.keys = map[string][]string{}
	}
	b.keys[r.URL.Path] = append(b.keys[r.URL.Path], r.Header.Get(HeaderIdempotencyKey))
	fail := r.URL.Path == "/v1/debits" && b.failDebits > 0
	if fail {
		b.failDebits--
	}
	b.mu.Unlock()
	if fail {
		return nil, testkit.ErrReset
	}
	resp := &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}
	switch r.URL.Path {
	case "/v1/debits":
		resp.StatusCode = http.StatusTemporaryRedirect
		resp.Header.Set("Location", "http://api.test/v2/debits")
	case "/v2/debits":
		if b.onV2 != nil {
			b.onV2()
		}
	case "/v1/audit":
		if b.onAudit != nil {
			b.onAudit()
		}
		if b.auditErr != nil {
			return nil, b.auditErr
		}
	}
	return resp, nil
}

// key returns the key of the i-th round trip to path, "" if none.
func (b *hopBase) key(path string, i int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i >= len(b.keys[path]) {
		return ""
	}
	return b.keys[path][i]
}

// checkHops fails t unless call i's two hops carried one key, and returns it.
func (b *hopBase) checkHops(t *testing.T, i int) string {
	t.Helper()
	k1, k2 := b.key("/v1/debits", i), b.key("/v2/debits", i)
	if k1 == "" || k1 != k2 {
		t.Errorf("call %d: the POST's hops carried keys %q and %q; want the call's key on both", i, k1, k2)
	}
	return k1
}

// wrappedKey marks a context derived by a RoundTripper around the Client's.
type wrappedKey struct{}

// audit sends another POST on ctx through c, as a hook or CheckRedirect
// might.
func audit(c *Client, ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1/audit", strings.NewReader("audit"))
	resp, err := c.HTTPClient().Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

func debit(t *testing.T, c *Client) (*http.Response, error) {
	return c.Do(newReq(t, context.Background(), http.MethodPost, "debit 1500"))
}

// strayClient returns a Client over b (with opts) whose hook, on each
// attempt at /v1/debits, runs stray in a goroutine of its own with the
// Client and the attempt's context, as a hook that reports might; wait
// waits for those goroutines.
func strayClient(b *hopBase, stray func(c *Client, ctx context.Context), opts ...Option) (c *Client, wait func()) {
	var wg sync.WaitGroup
	c = NewClient(append([]Option{WithBase(b), WithHook(func(a Attempt) {
		if a.Request.URL.Path != "/v1/debits" {
			return
		}
		wg.Add(1)
		go func(ctx context.Context) {
			defer wg.Done()
			stray(c, ctx)
		}(a.Request.Context())
		runtime.Gosched()
	})}, opts...)...)
	return c, wg.Wait
}

// A request sent from CheckRedirect on the context of the request it is
// given (the call's own) is an operation of its own: a key of its own,
// and the call's result untouched. The hop after it keeps the call's key.
func TestCheckRedirectRequestIsNotAHop(t *testing.T) {
	b := &hopBase{}
	var c *Client
	c = NewClient(WithBase(b), WithHTTPClient(&http.Client{
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			return audit(c, req.Context())
		},
	}))
	resp, err := debit(t, c)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	callKey := b.checkHops(t, 0)
	if k := b.key("/v1/audit", 0); k == "" || k == callKey {
		t.Errorf("the request sent from CheckRedirect carried key %q; want one of its own, not the call's %q", k, callKey)
	}

	// Its failure is not the call's.
	b = &hopBase{auditErr: testkit.ErrReset}
	stop := errors.New("no redirects please")
	c = NewClient(WithBase(b), WithMaxAttempts(1), WithHTTPClient(&http.Client{
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			_ = audit(c, req.Context())
			return stop
		},
	}))
	_, err = c.Do(newReq(t, WithKey(context.Background(), "debit-1"), http.MethodPost, "debit 1500"))
	var e *Error
	if !errors.Is(err, stop) || errors.As(err, &e) {
		t.Errorf("Do's error %v carries the *Error %v of another operation (the audit); want CheckRedirect's alone", err, e)
	}
}

// A request sent on the call's context from a goroutine a hook started,
// which reaches the Transport between two hops, must not take the call:
// the next hop would then get a key of its own, and the redirected POST
// would run under two keys.
func TestStrayBetweenHopsDoesNotTakeTheCall(t *testing.T) {
	b := &hopBase{}
	auditIn, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.onAudit = func() { close(auditIn); <-release }
	b.onV2 = func() { once.Do(func() { close(release) }) }
	start := make(chan struct{})
	c, wait := strayClient(b, func(c *Client, ctx context.Context) {
		<-start
		_ = audit(c, ctx)
	}, WithHTTPClient(&http.Client{
		CheckRedirect: func(*http.Request, []*http.Request) error {
			close(start) // the audit goes now, between the hops
			<-auditIn    // and is inside the base when the next hop starts
			return nil
		},
	}))
	resp, err := debit(t, c)
	wait()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	callKey := b.checkHops(t, 0)
	if k := b.key("/v1/audit", 0); k == "" || k == callKey {
		t.Errorf("the audit carried key %q; want one of its own, not the call's %q", k, callKey)
	}
}

// A request that was let in while the call was idle and ends after Do
// returned must not bring the call back: requests sent afterwards on the
// response's context are operations of their own.
func TestCallStaysOverAfterDo(t *testing.T) {
	b := &hopBase{}
	auditIn, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b.onAudit = func() { once.Do(func() { close(auditIn); <-release }) }
	done := make(chan struct{})
	var c *Client
	c = NewClient(WithBase(b), WithHTTPClient(&http.Client{
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			go func() {
				defer close(done)
				_ = audit(c, req.Context())
			}()
			<-auditIn
			return http.ErrUseLastResponse
		},
	}))
	resp, err := debit(t, c)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	close(release)
	<-done
	callKey := b.key("/v1/debits", 0)
	if err := audit(c, resp.Request.Context()); err != nil {
		t.Fatal(err)
	}
	if k := b.key("/v1/audit", 1); k == "" || k == callKey {
		t.Errorf("a request built after the call on its response's context carried %q; want one of its own, not the call's %q", k, callKey)
	}
}

// A call that a panic ended (in a hook here) is over too: a context the
// hook kept gives a later request no key of the call's (net/http's
// server, for one, recovers a handler's panic and goes on).
func TestCallOverAfterAPanic(t *testing.T) {
	b := &hopBase{}
	var kept context.Context
	c := NewClient(WithBase(b), WithHook(func(a Attempt) {
		if a.Request.URL.Path == "/v1/debits" {
			kept = a.Request.Context()
			panic("hook bug")
		}
	}))
	func() {
		defer func() { _ = recover() }()
		_, _ = debit(t, c)
	}()
	if err := audit(c, kept); err != nil {
		t.Fatal(err)
	}
	if k, callKey := b.key("/v1/audit", 0), b.key("/v1/debits", 0); k == "" || k == callKey {
		t.Errorf("a request sent after the call on a context it kept carried %q; want one of its own, not the call's %q", k, callKey)
	}
}

// The hops keep the call's key under the http.Client features that wrap
// a hop (a timeout, a cookie jar), through a RoundTripper set around the
// Client's Transport that clones the request (as otelhttp's does), and
// when the Transport's own requests are sent while a hop runs.
func TestHopsKeepTheKey(t *testing.T) {
	jar, _ := cookiejar.New(nil)
	b := &hopBase{}
	c := NewClient(WithBase(b), WithHTTPClient(&http.Client{Timeout: 5 * time.Second, Jar: jar}))
	inner := c.HTTPClient().Transport
	c.HTTPClient().Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return inner.RoundTrip(r.Clone(context.WithValue(r.Context(), wrappedKey{}, true)))
	})
	for i := range 3 {
		resp, err := debit(t, c)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		b.checkHops(t, i)
	}
}

// Printing the call's context, as CheckRedirect's logging might, reads
// none of its fields (the key among them) while a request sent from a
// hook's goroutine runs (-race).
func TestCallContextPrintsItsParentOnly(t *testing.T) {
	var printed []string
	c, wait := strayClient(&hopBase{}, func(c *Client, ctx context.Context) { _ = audit(c, ctx) }, WithHTTPClient(&http.Client{
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
				printed = append(printed, fmt.Sprintf(verb, req.Context()))
			}
			return nil
		},
	}))
	resp, err := debit(t, c)
	wait()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, p := range printed {
		if p != "context.Background.WithValue(saferetry.Client.Do call)" {
			t.Errorf("the call's context printed as %q", p)
		}
	}
}

// TestCallKeyStaysInItsCall: the key Client.Do pins for its call goes to
// the call's hops only. The call's context reaches further, into every
// attempt's request: a request sent from a hook on the attempt's context,
// or built after the call on the context of its response, is another
// operation and gets a key of its own (with the pinned key, a second
// payment of the same amount would be answered with the first one's
// replay, and never made). Found by a review helper. Two such requests at
// once must not race on what the call ended with (-race).
func TestCallKeyStaysInItsCall(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(201))
	var inHook []string
	var c *Client
	var hookOn atomic.Bool // for the first call only
	c = testClient(rc, WithHook(func(a Attempt) {
		if a.Request.URL.Path != "/v1/debits" || !hookOn.Load() {
			return
		}
		req, _ := http.NewRequestWithContext(a.Request.Context(), http.MethodPost, "http://api.test/v1/audit", strings.NewReader("audit"))
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		inHook = append(inHook, resp.Request.Header.Get(HeaderIdempotencyKey))
	}))
	hookOn.Store(true)
	resp, err := c.Do(newReq(t, context.Background(), http.MethodPost, "debit 1500"))
	hookOn.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	callKey, _ := KeyFromResponse(resp)
	if len(inHook) != 1 || inHook[0] == "" || inHook[0] == callKey {
		t.Fatalf("a request sent from the hook carried keys %q; want one of its own, not the call's %q", inHook, callKey)
	}

	after := make(chan string, 4)
	for _, send := range []func(*http.Request) (*http.Response, error){c.HTTPClient().Do, c.HTTPClient().Do, c.Transport().RoundTrip, c.Do} {
		go func() {
			req, _ := http.NewRequestWithContext(resp.Request.Context(), http.MethodPost, "http://api.test/v1/debits", strings.NewReader("debit 1500"))
			r, err := send(req)
			if err != nil {
				t.Error(err)
				after <- ""
				return
			}
			r.Body.Close()
			k, _ := KeyFromResponse(r)
			after <- k
		}()
	}
	seen := map[string]bool{callKey: true, inHook[0]: true}
	for range 4 {
		k := <-after
		if k == "" || seen[k] {
			t.Errorf("a request built after the call on its response's context carried key %q; want a new one (seen %v)", k, seen)
		}
		seen[k] = true
	}
}

// A request that would be let in by a call in one state must not be let
// in after the state changed under it: a stray request (Response nil)
// that looks while the first hop runs and tries after that hop returned
// resp1 must not become a hop, and the real next hop (Response resp1)
// must still be let in. Found by a review helper in a version that read
// the last response and the state in two steps.
func TestStrayAgainstHopEndIsRefused(t *testing.T) {
	tr := &Transport{}
	stray, first := &http.Request{}, &http.Request{}
	deadline := time.Now().Add(500 * time.Millisecond)
	for cycle := 0; cycle < 2000 && time.Now().Before(deadline); cycle++ {
		c := &callContext{Context: context.Background(), t: tr}
		if !c.enter(tr, first) {
			t.Fatal("the first hop was refused")
		}
		var stop, won atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			for !stop.Load() {
				if c.enter(tr, stray) {
					won.Store(true)
					return
				}
			}
		}()
		runtime.Gosched()
		resp1 := &http.Response{}
		c.leave(nil, resp1)
		runtime.Gosched()
		stop.Store(true)
		<-done
		if won.Load() {
			t.Fatalf("cycle %d: a stray request was let in after the first hop returned", cycle)
		}
		if !c.enter(tr, &http.Request{Response: resp1}) {
			t.Fatalf("cycle %d: the second hop was refused", cycle)
		}
	}
}

// End to end: a hook of the first hop starts a goroutine that sends other
// payments on the attempt's context through the Client's Transport until
// the call is over. None may carry the call's key, and the redirected
// POST's two hops must carry one key (-race: nor may they write the
// call's results).
func TestStraysFromAHookWhileTheCallRuns(t *testing.T) {
	deadline := time.Now().Add(time.Second)
	for call := 0; call < 200 && time.Now().Before(deadline); call++ {
		b := &hopBase{}
		var stop atomic.Bool
		c, wait := strayClient(b, func(c *Client, ctx context.Context) {
			for !stop.Load() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1/audit", nil)
				if resp, err := c.Transport().RoundTrip(req); err == nil {
					resp.Body.Close()
				}
			}
		})
		resp, err := debit(t, c)
		stop.Store(true)
		wait()
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		callKey := b.checkHops(t, 0)
		for i := 0; b.key("/v1/audit", i) != ""; i++ {
			if b.key("/v1/audit", i) == callKey {
				t.Fatalf("call %d: audit %d carried the call's key %q", call, i, callKey)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// A request given to Do that has a Response of its own (net/http sets it
// on every request a redirect made; Clone keeps it), such as one made
// from an earlier call's response, is the call's first hop all the same,
// and its redirect the second.
func TestFirstHopWithAResponse(t *testing.T) {
	b := &hopBase{}
	c := NewClient(WithBase(b))
	resp, err := debit(t, c)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.Response == nil {
		t.Fatal("the final request has no Response: the test sets up nothing")
	}
	again := resp.Request.Clone(context.Background())
	again.URL.Path = "/v1/debits"
	again.Header.Del(HeaderIdempotencyKey)
	again.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("debit 99")), nil }
	again.Body, again.ContentLength = io.NopCloser(strings.NewReader("debit 99")), 8
	resp, err = c.Do(again)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if k0, k1 := b.checkHops(t, 0), b.checkHops(t, 1); k0 == k1 {
		t.Errorf("both calls carried key %q", k0)
	}
}

// A RoundTripper around the Client's Transport that sends a hop again
// after it failed (its own retry) sends the same hop: the call's key
// again, for the first try may have been executed.
func TestHopSentAgainAfterAFailure(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, r.Header.Get(HeaderIdempotencyKey))
		if len(keys) == 1 {
			return nil, testkit.ErrReset
		}
		return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
	c := NewClient(WithBase(base), WithMaxAttempts(1))
	inner := c.HTTPClient().Transport
	c.HTTPClient().Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := inner.RoundTrip(r)
		if err != nil {
			resp, err = inner.RoundTrip(r)
		}
		return resp, err
	})
	req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/debits", strings.NewReader("debit 1500"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Errorf("the two tries of one hop carried %q; want the call's key on both", keys)
	}
}

// After a hop failed, and before it is sent again (by a RoundTripper
// around the Transport that retries) or Do returns, a request sent from a
// hook's goroutine on the attempt's context is no hop: it must not take
// the key under which the payment may have run, and the hop sent again,
// and its redirect, must keep that key. Found by a review helper: the
// attempt's context showed the call, which, back to waiting for the hop,
// let the first request that came in.
func TestStrayAfterAFailedHop(t *testing.T) {
	b := &hopBase{failDebits: 1}
	failed, strayDone := make(chan struct{}), make(chan struct{})
	var c *Client
	c = NewClient(WithBase(b), WithMaxAttempts(1), WithHook(func(a Attempt) {
		if a.Request.URL.Path == "/v1/debits" && a.Err != nil {
			go func(ctx context.Context) {
				<-failed
				_ = audit(c, ctx)
				close(strayDone)
			}(a.Request.Context())
		}
	}))
	inner := c.HTTPClient().Transport
	c.HTTPClient().Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		again := r.Clone(r.Context())
		resp, err := inner.RoundTrip(r)
		if err != nil && r.URL.Path == "/v1/debits" {
			close(failed) // the wrapper's own backoff ...
			<-strayDone   // ... during which the hook's request goes
			again.Body, _ = r.GetBody()
			resp, err = inner.RoundTrip(again)
		}
		return resp, err
	})
	resp, err := debit(t, c)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	k0, k1, k2 := b.key("/v1/debits", 0), b.key("/v1/debits", 1), b.key("/v2/debits", 0)
	if k0 == "" || k0 != k1 || k0 != k2 {
		t.Errorf("the payment's two tries and its redirect carried %q, %q and %q; want one key on all", k0, k1, k2)
	}
	if k := b.key("/v1/audit", 0); k == "" || k == k0 {
		t.Errorf("the hook's request carried %q; want one of its own, not the payment's %q", k, k0)
	}
}

// With a cookie jar, net/http adds the jar's cookies to the header of the
// request it sends: Client.Do must not let that reach the caller's
// request, which a retry under the same key sends again (it sent the
// cookie twice). Found by a review helper.
func TestDoWithAJarLeavesTheCallersHeader(t *testing.T) {
	var mu sync.Mutex
	var cookies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cookies = append(cookies, r.Header.Get("Cookie"))
		mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "s1", Path: "/"})
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	c := NewClient(WithHTTPClient(&http.Client{Jar: jar}))
	req, _ := http.NewRequestWithContext(WithKey(context.Background(), "order-42"), http.MethodPost, srv.URL+"/pay", strings.NewReader("x"))
	for range 3 {
		req.Body = io.NopCloser(strings.NewReader("x"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := req.Header.Values("Cookie"); len(got) > 0 {
		t.Errorf("the caller's request was modified: Cookie %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"", "sid=s1", "sid=s1"}; fmt.Sprint(cookies) != fmt.Sprint(want) {
		t.Errorf("cookies sent %q, want %q", cookies, want)
	}
}

// A hop that a RoundTripper around the Transport sends again after a try
// that may have reached the server is that operation still: if the new
// try fails before it is sent (its context ended), the outcome stays
// unknown, for the wrapper and for Do, never "not sent". Found by a
// review helper.
func TestHopSentAgainStaysOutcomeUnknown(t *testing.T) {
	b := &hopBase{failDebits: 1}
	c := NewClient(WithBase(b), WithMaxAttempts(1))
	inner := c.HTTPClient().Transport
	var second error
	c.HTTPClient().Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := inner.RoundTrip(r)
		if err != nil {
			ctx, cancel := context.WithCancel(r.Context())
			cancel() // the wrapper's own deadline, say, ends before the new try
			resp, err = inner.RoundTrip(r.Clone(ctx))
			second = err
		}
		return resp, err
	})
	_, err := debit(t, c)
	if !errors.Is(second, ErrOutcomeUnknown) || errors.Is(second, ErrNotSent) {
		t.Errorf("the new try failed with %v; want ErrOutcomeUnknown: the first may have been executed", second)
	}
	if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrNotSent) {
		t.Errorf("Do = %v; want ErrOutcomeUnknown", err)
	}
}

// A hop the Transport refuses before its first attempt (a cross-origin
// redirect of a keyed POST) is what the call ended with, so that Do has
// it even when net/http's Client replaces the error it returns.
func TestRefusedHopIsTheCallsResult(t *testing.T) {
	c := NewClient(WithBase(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("the refused hop was sent to %s", r.URL)
		return nil, testkit.ErrReset
	})))
	call, err := c.transport.cfg.newCall(c.transport, newReq(t, context.Background(), http.MethodPost, "debit 1500"))
	if err != nil {
		t.Fatal(err)
	}
	prev := &http.Response{Request: httptest.NewRequest(http.MethodPost, "http://api.test/v1/debits", nil)}
	call.hop.Store(prev)
	req := httptest.NewRequest(http.MethodPost, "http://elsewhere.test/v2/debits", strings.NewReader("debit 1500")).WithContext(call)
	req.RequestURI, req.Response = "", prev
	_, err = c.transport.RoundTrip(req)
	if !errors.Is(err, ErrCrossOriginRedirect) {
		t.Fatalf("RoundTrip = %v, want ErrCrossOriginRedirect", err)
	}
	if call.err == nil || !errors.Is(call.err, ErrCrossOriginRedirect) || call.key != call.pinnedKey() || call.key == "" {
		t.Errorf("the call ended with %v, key %q; want the refusal, under the pinned key %q", call.err, call.key, call.pinnedKey())
	}
}

// TestCallKeepsNoCallersBody: what outlives a Client.Do call (the
// response, whose Request's context leads to the call's context, and an
// attempt's request a hook keeps) must not keep the caller's body in
// memory when the attempts do not: here a RoundTripper around the
// Transport sends a body of its own, as one that compresses or signs the
// body does. The request Do hands net/http shares the call's allocation
// (see doCall), and so lived as long as the call's context, with the
// caller's Body and GetBody. A response whose Request is that request
// itself (a RoundTripper around the Transport that answers on its own)
// keeps it whole.
func TestCallKeepsNoCallersBody(t *testing.T) {
	type payload struct{ b [1 << 16]byte }
	for _, flow := range []string{"201", "303", "error", "own answer"} {
		t.Run(flow, func(t *testing.T) {
			n := 0
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				n++
				if r.Body != nil {
					_, _ = io.Copy(io.Discard, r.Body)
					r.Body.Close()
				}
				switch {
				case flow == "error":
					return nil, errors.New("connection reset")
				case flow == "303" && n == 1:
					return &http.Response{StatusCode: http.StatusSeeOther, Header: http.Header{"Location": {"/v1/debits/1"}}, Body: http.NoBody, Request: r}, nil
				}
				return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
			})
			var kept *http.Request // the last attempt's request, kept by a hook
			c := NewClient(WithBase(base), WithMaxAttempts(1), WithHook(func(a Attempt) { kept = a.Request }))
			hc := c.HTTPClient()
			inner := hc.Transport
			hc.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if flow == "own answer" {
					return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
				}
				r2 := r.Clone(r.Context())
				if r.Body != nil {
					_, _ = io.Copy(io.Discard, r.Body)
					r.Body.Close()
					r2.Body, r2.ContentLength = io.NopCloser(strings.NewReader(`{}`)), 2
					r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(`{}`)), nil }
				}
				return inner.RoundTrip(r2)
			})
			p := new(payload)
			callers := weak.Make(p)
			req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/debits", bytes.NewReader(p.b[:]))
			resp, err := c.Do(req)
			if (err != nil) != (flow == "error") {
				t.Fatalf("err = %v", err)
			}
			req, p = nil, nil
			runtime.GC()
			if flow == "own answer" {
				if callers.Value() == nil || resp.Request.GetBody == nil {
					t.Error("the request the answer carries lost its body")
				}
			} else if callers.Value() != nil {
				t.Error("the caller's body is still in memory after the call, which the attempts do not keep")
			}
			runtime.KeepAlive(resp)
			runtime.KeepAlive(kept)
		})
	}
}

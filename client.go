package saferetry

import (
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/saferetry/saferetry/internal/contract"
	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// Client is a small SDK-style HTTP client: an [http.Client] whose Transport
// is a saferetry [Transport], and whose Do reports every final status of
// 400 or above as an [*APIError].
//
// Use [NewClient]; the zero Client is not usable. A Client is safe for
// concurrent use by multiple goroutines.
type Client struct {
	hc           *http.Client
	transport    *Transport
	maxErrorBody int64
}

// NewClient returns a Client. [WithBase] and [WithHTTPClient] choose what
// carries the attempts; every other option configures its [Transport].
func NewClient(opts ...Option) *Client {
	cfg := newConfig(opts)
	hc := new(http.Client)
	if cfg.httpClient != nil {
		*hc = *cfg.httpClient
	}
	base := cfg.base
	if base == nil {
		base = hc.Transport
	}
	t := newTransport(base, cfg)
	hc.Transport = t
	return &Client{hc: hc, transport: t, maxErrorBody: cfg.maxErrorBody}
}

// HTTPClient returns the underlying http.Client, for APIs that want one.
// Requests made through it are retried by the Transport but get no
// [*APIError] for error statuses, a generated key is chosen per redirect
// hop (see [Transport]), and net/http returns a 307 or 308 as the answer
// when the request's body has no GetBody.
func (c *Client) HTTPClient() *http.Client { return c.hc }

// Transport returns the Client's Transport.
func (c *Client) Transport() *Transport { return c.transport }

// Do sends req as one logical operation (see [Transport]). For a final
// status below 400 it returns the response, whose body the caller must
// close. For a final status of 400 or above it reads up to the
// error-body limit, closes the body and returns a nil response with an
// [*APIError] (with the read's error in BodyErr when the body was cut
// short). An operation that ends without a response returns an
// error matching [ErrOutcomeUnknown] or [ErrNotSent] (wrapped in a
// *url.Error by net/http), from which errors.As finds the [*Error] with
// the key.
//
// A key generated for it is chosen before the first hop, so that a 307 or
// 308 redirect, which net/http follows with a new RoundTrip, repeats the
// operation under the same key. A body without GetBody, which net/http
// needs to follow a 307 or 308, is buffered as the Transport would (see
// [WithMaxBufferedBody]) before the first hop, within the http.Client's
// Timeout (see [WithHTTPClient]); a larger body is sent once,
// and its redirect is returned as the answer. The Transport knows the next
// hop by the response it follows (for the first, req's own Response,
// usually none). A RoundTripper put around the Transport (on
// [Client.HTTPClient]) must keep each hop's Response (as Clone and
// WithContext do) and return the Transport's responses as they are, as
// otelhttp's does. A hop that failed
// and is sent again is the same hop (whose outcome stays unknown once a
// try of it may have reached the server); one sent again after it got a
// response is not (leave such retries to the Transport). Such a
// RoundTripper must not send requests of its own through the Client's
// Transport on a hop's context before the first hop or after it failed:
// one would be taken for that hop, as would a copy of a hop (or of the
// request CheckRedirect is given) sent before it. Any other request sent
// on the call's context is an operation of its own, with a key of its own
// unless its context carries one from [WithKey]: one made on the context
// of an attempt or of the response, which do not show the call, or on that
// of the request CheckRedirect is given.
//
// With a cookie jar, net/http adds the jar's cookies to the header of
// the request it sends; Do gives it a copy of req's header then, so that
// req is not modified.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	call, err := c.transport.cfg.newCall(c.transport, req)
	if err != nil {
		retrypolicy.CloseBody(req)
		return nil, err
	}
	panicked := true // until net/http's Do returns (see callContext.end)
	defer func() { call.end(panicked) }()
	// WithContext inlined: its copy does not escape, so the request is
	// the call's allocation.
	call.first = *req.WithContext(call)
	first := &call.first
	if c.hc.Jar != nil {
		first.Header = req.Header.Clone()
	}
	if req.GetBody == nil && retrypolicy.HasBody(req) {
		redirectableBody(first, c.transport.cfg.maxBufferedBody, c.hc.Timeout)
	}
	resp, err := c.hc.Do(first)
	panicked = false
	if err != nil {
		return nil, keepOutcome(err, call.err)
	}
	if resp.StatusCode < 400 {
		return resp, nil
	}
	return nil, c.apiError(resp, call)
}

func (c *Client) apiError(resp *http.Response, call *callContext) *APIError {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.maxErrorBody))
	e := &APIError{
		StatusCode: resp.StatusCode,
		Header:     resp.Header,
		Key:        call.keptKey(call.key),
		Attempts:   call.attempts,
		Reason:     reasonOf(call.reason),
		Replayed:   contract.Replayed(resp.Header),
		Body:       body,
		BodyErr:    err,
	}
	if e.Key == "" {
		e.Key, _ = KeyFromResponse(resp)
	}
	if p := new(Problem); contract.DecodeProblem(resp.Header, body, p) {
		e.Problem = p
	}
	return e
}

// keepOutcome makes sure the Transport's error stays reachable through the
// error http.Client.Do returned: when its Timeout expires, net/http replaces
// the Transport's error by a timeout error that only copies its text.
func keepOutcome(err error, op *Error) error {
	var e *Error
	var ue *url.Error
	if op == nil || errors.As(err, &e) || !errors.As(err, &ue) {
		return err
	}
	ue.Err = &keptError{outer: ue.Err, op: op}
	return err
}

// keptError is net/http's error with the Transport's [*Error] under it; it
// reads as net/http's error and keeps its Timeout.
type keptError struct {
	outer error
	op    *Error
}

func (e *keptError) Error() string   { return e.outer.Error() }
func (e *keptError) Unwrap() []error { return []error{e.outer, e.op} }

func (e *keptError) Timeout() bool {
	t, ok := e.outer.(interface{ Timeout() bool })
	return ok && t.Timeout()
}

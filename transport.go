package saferetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unsafe"

	"github.com/saferetry/saferetry/internal/clock"
	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// Transport is an [http.RoundTripper] that makes each request one logical
// operation: it attaches an idempotency key (see [WithKey] and
// [WithKeyMethods]), sends the request, and retries retryable outcomes with
// the same key and body after a backoff or Retry-After wait, within the
// attempt limit, the context deadline and the retry budget.
//
// It keeps the RoundTripper contract: the caller's request is never
// modified (each attempt sends a clone), its body is closed on every path,
// a final response is returned with a nil error whatever its status
// ([ReasonFromResponse] tells why the operation ended on it), and an
// error comes without a response. An operation that ends without a
// response returns an [*Error] matching [ErrOutcomeUnknown] (or
// [ErrNotSent] when no attempt reached the server, as for a done context
// or an http(s) URL without a host, rejected before sending).
//
// Each RoundTrip is one operation: under a plain [http.Client], every hop
// of a redirect gets its own generated key. [Client.Do] instead chooses the
// key once, so that a POST redirected by 307 or 308 keeps it.
//
// Use [NewTransport]; the zero Transport is not usable. A Transport is safe
// for concurrent use by multiple goroutines; its retry budget is shared by
// all of them. Most callers want [NewClient] instead, which also turns
// error statuses into [*APIError].
type Transport struct {
	cfg    *config
	base   http.RoundTripper
	policy retrypolicy.Policy
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport sending attempts through base; nil base
// means [http.DefaultTransport]. The body of an answer that is retried is
// read a little and closed in a goroutine of its own, and closed beside
// that read if it has not ended within a second: base's response bodies
// must allow a Close beside a Read, as net/http's do.
func NewTransport(base http.RoundTripper, opts ...Option) *Transport {
	return newTransport(base, newConfig(opts))
}

func newTransport(base http.RoundTripper, cfg *config) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{cfg: cfg, base: base, policy: retrypolicy.Policy{
		MaxRetryAfter: cfg.maxRetryAfter,
		Classify:      retrypolicy.Classifier(cfg.classifier),
		Budget:        retrypolicy.NewBudget(cfg.budgetCapacity, cfg.budgetCost),
		NewBackoff:    cfg.newBackoff,
		Jitter:        retrypolicy.Jitter,
	}}
}

// CloseIdleConnections closes idle connections of the base RoundTripper,
// when it has such a method.
func (t *Transport) CloseIdleConnections() { closeIdle(t.base) }

func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip runs one logical operation; see [Transport].
func (t *Transport) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	cfg := t.cfg
	if err := retrypolicy.CheckURL(req.URL); err != nil {
		retrypolicy.CloseBody(req)
		return nil, &Error{Cause: ErrNotSent, Err: err}
	}
	call := hopOf(t, req)
	op := &operation{t: t, call: call}
	if call != nil {
		followed := req.Response
		defer func() { call.leave(followed, resp) }()
	}
	op.timed = len(cfg.hooks) > 0 || cfg.logger != nil
	// A generated key's text lives in op, which holds the first attempt's
	// request, or in the Client.Do call, which holds its last answer: a
	// key kept after the operation would keep them, and the buffered
	// body. A hook or a logger's handler may keep the key, so it then
	// gets a text of its own (see ownKey); the other ways out (an error,
	// a Client's call, KeyFromResponse) copy it (see keptKey, errorKey).
	key, wire, _, err := cfg.resolveKey(req, op.call, &op.keyText)
	if err == nil && op.timed {
		key, wire = op.ownKey(key, wire)
	}
	if err == nil && req.Response != nil {
		switch cfg.redirectHop(req, key) {
		case retrypolicy.HopRefuse:
			retrypolicy.CloseBody(req)
			return nil, op.refuse(&Error{Cause: ErrNotSent, Key: key, Err: ErrCrossOriginRedirect})
		case retrypolicy.HopSendWithoutKey:
			req, key, wire = retrypolicy.WithoutKey(req), "", ""
		}
	}
	if err != nil {
		retrypolicy.CloseBody(req)
		var e *Error
		if errors.As(err, &e) {
			return nil, op.refuse(e)
		}
		return nil, op.refuse(&Error{Cause: ErrNotSent, Err: err})
	}
	b, err := newBody(req, cfg.maxBufferedBody)
	if err != nil {
		return nil, op.refuse(&Error{Cause: ErrNotSent, Key: key, Err: err})
	}
	op.key, op.body = key, b // op.body holds req: see op.req
	// A hop sent again after a try that may have reached the server (by a
	// RoundTripper around the Transport that retries) is that operation
	// still: its outcome stays unknown, whatever this try does.
	if c := op.call; c != nil && c.err != nil && c.err.Cause == ErrOutcomeUnknown && c.err.Key == key {
		op.sent = true
	}
	if wire != "" {
		op.wire[0] = wire
	}
	// A request made on an attempt's context is no hop of a Client.Do
	// call the operation is one of (see callContext.enter): op.written
	// hides the call (retrypolicy.CallKey). A hop that carries the call's
	// context itself, as Client.Do hands it to net/http, has its attempts'
	// contexts made from the call's parent, which answers all but that key
	// alike: their every lookup takes one step less, and the response,
	// whose Request carries them, keeps the call only by the text of a
	// key it generated (see callContext.text).
	ctx := req.Context()
	if call != nil && ctx == context.Context(call) {
		ctx = call.Context
	}
	op.written.Trace(ctx) // it returns &op.written: see ctx
	resp, err = op.run()
	op.release()
	return resp, err
}

// operation is the state of one RoundTrip call. Its fields are laid out
// so that it stays in the 640-byte size class with the 8-byte header that
// the runtime puts before an object of over 512 bytes with pointers (see
// TestOperationSizeClass): the flags fill the bytes after keyText, what
// run's loop alone needs stays in its frame (see tried), and each retry
// decision's State is made from op's fields but its Progress (see decide).
type operation struct {
	t        *Transport
	call     *callContext // the Client.Do call this operation is a hop of, or nil
	key      string
	wire     [1]string            // the key header's value, "" for none: every attempt's header shares it
	body     body                 // the body of the caller's request, which it holds (see req)
	progress retrypolicy.Progress // what the retry decisions carry from one to the next

	// written tells, through the connection trace in the attempts'
	// context (see ctx), that the base may have written some of the
	// current attempt's request, though its error says it was not sent,
	// or that it wrote none of it, though its error does not say so (see
	// retrypolicy.Written). It keeps the last decision's reason, 0 before
	// the first, where the answer's Request finds it (see
	// ReasonFromResponse).
	written retrypolicy.Written
	keyText keyText // the text of a generated key (key and wire share it; copied when timed, see ownKey)

	sent      bool // some attempt may have reached the server
	timed     bool // a hook or logger is set: attempts are reported (see report), with their durations
	firstUsed bool // first holds the first attempt's request

	// first is the first attempt's request (see attemptRequest): kept in
	// op, it costs no allocation of its own.
	first http.Request
}

// req returns the caller's request, which op.body holds from newBody
// until release: one pointer, not two, keeps op in its size class.
func (op *operation) req() *http.Request { return op.body.req }

// ctx returns the operation's context, which its attempts' contexts are
// made from: written, once RoundTrip has made it carry the connection
// trace (retrypolicy.Written.Trace returns the Written itself).
func (op *operation) ctx() context.Context { return &op.written }

// release drops what op holds of the caller's request once the operation
// is over. op itself may live on: it is the attempts' context (written),
// which a response keeps in its Request, and it holds the first attempt's
// request (first), which a hook may keep. What op holds should not keep
// the caller's request, or the Client.Do call it is a hop of, in memory.
// A key kept on its own does not keep op (see keptKey).
func (op *operation) release() {
	op.body = body{} // and so op.req()
	op.call = nil    // the call's results are in (see finish)
}

// tried is what an operation's attempts so far got, which run keeps in its
// frame rather than in the operation (see operation).
type tried struct {
	began      time.Time // when the first attempt was sent, when timed
	lastStatus int       // the status of the last attempt that got a response, else 0
	lastErr    error     // the last attempt's error, if it got no response, else nil
}

// attempt is one try on the wire and what it got.
type attempt struct {
	req      *http.Request
	resp     *http.Response
	err      error
	timedOut bool               // the attempt's own timeout expired
	wrote    bool               // the base may have written some of it (see operation.written)
	noConn   bool               // the base wrote none of it: it got no connection (see operation.written)
	cancel   context.CancelFunc // ends the attempt's timeout, if any
	start    time.Time          // when it was sent, when the operation is timed
	took     time.Duration      // the round trip, when the operation is timed
}

func (op *operation) run() (*http.Response, error) {
	rc, err := op.body.next()
	if err != nil {
		return nil, op.fail(0, err, 0)
	}
	var planned retrypolicy.Verdict // the retry about to be made, if any
	var tr tried
	// drained is closed when the drains of the retried answers are over;
	// every return waits for it (see awaitDrains): to its end when a
	// context ends their reads, so that the caller then never gets an
	// answer or an error while an intermediate body is still open, and
	// for drainGrace otherwise, after which a body still being read (one
	// that trickles in or stalls) may be open when the caller gets it,
	// until drainLimit closes it.
	var drained chan struct{}
	defer func() {
		if drained != nil {
			op.awaitDrains(drained)
		}
	}()
	for n := 1; ; n++ {
		if err := retrypolicy.ContextErr(op.ctx()); err != nil {
			// This attempt is not sent: with a done context the base
			// would fail it, and it would count as maybe sent. The retry
			// it was to be costs the budget nothing.
			op.t.policy.Forgo(planned, &op.progress)
			return nil, op.interrupted(n-1, err, rc, &tr)
		}
		at := op.send(rc)
		if n == 1 {
			tr.began = at.start
		}
		v, next := op.decide(n, &at, &tr)
		if !v.Retry {
			return op.end(n, &at, tr.lastStatus)
		}
		// The answer is drained during the wait, not before it: an error
		// body that trickles in must not push the wait past the deadline
		// the decision kept to. The attempt's own context (with
		// WithAttemptTimeout), ended right after the wait, or the
		// operation's, ends a drain that net/http is still reading, and
		// drainLimit one that nothing else ends.
		if at.resp != nil {
			drained = drainAnswer(op.t.cfg.clock, at.resp.Body, drained)
		}
		err := clock.Sleep(op.ctx(), op.t.cfg.clock, v.Wait)
		if drained != nil && err == nil {
			op.endDrain(drained)
		}
		if at.cancel != nil {
			at.cancel()
		}
		if err != nil {
			op.t.policy.Forgo(v, &op.progress)
			return nil, op.interrupted(n, retrypolicy.ContextErr(op.ctx()), next, &tr)
		}
		rc, planned = next, v
	}
}

// drainGrace is how long the operation waits, after a retry's wait, for
// the drain of the retried answer to finish: enough for an answer already
// received, so that its connection goes back to the pool before the next
// attempt asks for one (after a wait of 0 too), too little to matter to a
// deadline.
const drainGrace = 5 * time.Millisecond

// endDrain waits for the drain of a retried answer (see run) until it
// finishes, drainGrace passes or the context ends, whichever comes first,
// before the next attempt. It never touches the body itself: a drain
// still blocked goes on until its read returns, which the attempt's
// context ending, the server, or drainLimit (see drainAnswer) brings
// about; the operation waits for it, or for drainGrace when no context
// ends its read, before it returns (see awaitDrains).
func (op *operation) endDrain(drained <-chan struct{}) {
	select {
	case <-drained:
		return
	default:
	}
	t := time.NewTimer(drainGrace)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
	case <-op.ctx().Done():
	}
}

// awaitDrains waits, before the operation returns, for the drains of its
// retried answers (see run). A drain whose read a context ends (the
// operation's, done, or the attempts' own, which WithAttemptTimeout gives
// them and run ends after each wait) is waited for to its end. Otherwise
// nothing but the server, the operation's deadline if it has one, or
// drainLimit ends the read of a body that trickles in or stopped
// arriving, so a drain is waited for drainGrace at most and then left to
// its goroutine, which closes the body once the read returns: the outcome
// in hand must not wait for the server, or up to the deadline or the
// limit, on an answer that was not kept.
func (op *operation) awaitDrains(drained <-chan struct{}) {
	if op.ctx().Err() == nil && op.t.cfg.attemptTimeout <= 0 {
		op.endDrain(drained)
		if op.ctx().Err() == nil {
			return
		}
	}
	<-drained // a context's end ends the reads
}

// send makes one attempt with body rc, under the per-attempt timeout if
// one is set, and keeps the RoundTripper contract when the base breaks it.
func (op *operation) send(rc io.ReadCloser) attempt {
	actx, cancel := op.ctx(), context.CancelFunc(nil)
	if d := op.t.cfg.attemptTimeout; d > 0 {
		actx, cancel = context.WithTimeout(op.ctx(), d)
	}
	r := op.attemptRequest(actx, rc)
	var start time.Time
	if op.timed {
		start = op.t.cfg.clock.Now()
	}
	op.written.Reset()
	resp, err := op.t.base.RoundTrip(r)
	var took time.Duration
	if op.timed {
		took = op.t.cfg.clock.Now().Sub(start)
	}
	switch {
	case err != nil && resp != nil:
		// A broken base; keep the contract towards our caller.
		retrypolicy.Drain(resp.Body)
		resp = nil
	case err == nil && resp == nil:
		err = errors.New("saferetry: base RoundTripper returned no response and no error")
	case resp != nil && resp.Body == nil:
		// Also a broken base (net/http promises a non-nil Body); the
		// caller, the drain and the attempt-timeout wrapper may close it.
		resp.Body = http.NoBody
	}
	return attempt{req: r, resp: resp, err: err, timedOut: resp == nil && actx.Err() != nil, wrote: op.written.Load(), noConn: op.written.NoConn(), cancel: cancel, start: start, took: took}
}

// decide records attempt n, asks the retry policy what comes next, prepares
// the next attempt's body for a retry, and reports the attempt to the hooks
// and the logger; tr is what the attempts so far got, to which it adds.
func (op *operation) decide(n int, at *attempt, tr *tried) (v retrypolicy.Verdict, next io.ReadCloser) {
	if at.resp == nil && !at.timedOut {
		at.err = retrypolicy.MarkRefused(at.req, at.err, at.wrote)
	}
	o := retrypolicy.Outcome{Request: at.req, Response: at.resp, Err: at.err, TimedOut: at.timedOut}
	if at.resp != nil {
		tr.lastStatus, tr.lastErr, op.sent = at.resp.StatusCode, nil, true
	} else {
		tr.lastErr = at.err
		op.sent = op.sent || retrypolicy.Sent(at.err, at.timedOut, at.wrote, at.noConn)
	}
	st := retrypolicy.State{
		Attempt:       n,
		MaxAttempts:   op.t.cfg.maxAttempts,
		UnsafeNoKey:   op.key == "" && !retrypolicy.RetriedWithoutKey(op.req().Method),
		NotReplayable: !op.body.replayable,
		Done:          op.ctx().Err() != nil,
		Progress:      op.progress,
	}
	st.Deadline, _ = op.ctx().Deadline()
	p, clk := &op.t.policy, op.t.cfg.clock
	// Decide runs the caller's code (the classifier, the backoff factory
	// and its schedule), and so do next (the request's GetBody), the
	// hooks and the logger, all while the answer is open and, from the
	// moment Decide spends it, with the retry's cost taken from the
	// budget. Should one panic, the panic goes on to the caller as it is,
	// but first the operation lets go of what the attempt holds, which no
	// one else would: the answer's body is closed, so that a caller that
	// recovers (net/http's server does, for a handler) is not left with a
	// connection held for good, and the retry planned, never to be made,
	// goes back to the budget that the Transport's other operations share.
	decided := false
	defer func() {
		if !decided {
			op.abandon(v, at, next)
		}
	}()
	v = p.Decide(o, &st, clk.Now)
	op.progress = st.Progress
	var bodyErr error // why the next attempt's body could not be made
	if v.Retry {
		if next, bodyErr = op.body.next(); bodyErr != nil {
			v = p.Veto(v, o, &op.progress, retrypolicy.ReasonBodyNotReplayable)
		}
	}
	op.written.SetReason(v.Reason)
	if op.timed { // timed is what observe needs: a hook or a logger
		op.report(n, at, tr, v)
	}
	decided = true
	if bodyErr != nil && at.resp == nil {
		// The operation's error, not the attempt's (the hooks had that):
		// it ends on this attempt because of bodyErr.
		at.err = fmt.Errorf("%w (next attempt's body: %w)", at.err, bodyErr)
	}
	return v, next
}

// report hands attempt n, after which v was decided, to the hooks and the
// logger (see observe); tr is what the attempts so far got.
func (op *operation) report(n int, at *attempt, tr *tried, v retrypolicy.Verdict) {
	a := Attempt{Request: at.req, Key: op.key, Number: n, Err: at.err, Decision: decision(v.Retry),
		Reason: reasonOf(v.Reason), RetryAfter: v.RetryAfter, Wait: v.Wait,
		Duration: at.took, Elapsed: op.t.cfg.clock.Now().Sub(tr.began)}
	if at.resp != nil {
		a.StatusCode = at.resp.StatusCode
	}
	// A retry the classifier asked for and a limit stopped leaves an
	// outcome as retryable as one the rules retry.
	op.t.cfg.observe(op.ctx(), &a, v.Retryable || v.GaveUp())
}

// abandon lets go of what attempt at holds when decide does not end (see
// there): the retry v planned, the next attempt's body, the answer, the
// attempt's timeout, and the request's body if no attempt took it.
func (op *operation) abandon(v retrypolicy.Verdict, at *attempt, next io.ReadCloser) {
	op.t.policy.Forgo(v, &op.progress)
	if next != nil {
		next.Close()
	}
	if at.resp != nil {
		at.resp.Body.Close()
	}
	if at.cancel != nil {
		at.cancel()
	}
	op.body.closeUnused()
}

// end returns the outcome of the operation's last attempt, n;
// lastStatus is the status of the last attempt that got a response.
func (op *operation) end(n int, at *attempt, lastStatus int) (*http.Response, error) {
	if at.resp == nil {
		if at.cancel != nil {
			at.cancel()
		}
		return nil, op.fail(n, at.err, lastStatus)
	}
	op.finish(n, nil)
	if at.resp.Request == nil {
		at.resp.Request = at.req
	}
	if at.cancel != nil {
		at.resp.Body = withCancel(at.resp.Body, at.cancel)
	}
	return at.resp, nil
}

// attemptRequest clones the caller's request for one attempt: its own
// context, header map (with the key) and body.
func (op *operation) attemptRequest(ctx context.Context, rc io.ReadCloser) *http.Request {
	var r *http.Request
	if op.firstUsed {
		r = op.req().WithContext(ctx)
	} else {
		// WithContext inlined: its copy does not escape, so the
		// request's only allocation is op's.
		op.first, op.firstUsed = *op.req().WithContext(ctx), true
		r = &op.first
	}
	r.Header = cloneHeader(op.req().Header, op.wire[:])
	op.body.apply(r, rc)
	return r
}

// cloneHeader copies h into a new map and, when wire holds a value, sets
// the key header to wire, in one allocation (the map). The value slices
// are shared with h (and wire with the operation), their capacity clipped
// so that an Add on the copy appends to a slice of its own: net/http's
// contract is that a RoundTripper does not modify its request, so nothing
// writes to them in place.
func cloneHeader(h http.Header, wire []string) http.Header {
	keyed := wire[0] != ""
	n := len(h)
	if keyed {
		n++
	}
	// Entry by entry, not maps.Clone: that copies the map's whole storage,
	// which is what the caller's map was made with or grew to, not what it
	// holds (see TestAttemptHeaderCostsNotCallersCapacity), and every
	// attempt pays it.
	h2 := make(http.Header, n)
	if len(h) > 0 { // see contract.KeyHeaderValues
		for k, vv := range h {
			h2[k] = vv[:len(vv):len(vv)]
		}
	}
	if keyed {
		h2[HeaderIdempotencyKey] = wire[:1:1]
	}
	return h2
}

// refuse records e, the error of an operation refused before its first
// attempt, for a Client waiting on it (see finish), and returns it.
func (op *operation) refuse(e *Error) error {
	op.key = e.Key
	e.Key = op.errorKey()
	op.finish(0, e)
	return e
}

// finish records the attempt count and the error, if any, for a Client
// waiting on them.
func (op *operation) finish(n int, err *Error) {
	if call := op.call; call != nil {
		call.attempts, call.key, call.reason, call.err = n, op.keptKey(), op.written.Reason(), err
	}
}

// interrupted ends an operation whose context is done between attempts,
// after n attempts: it closes the body prepared for the next one and keeps
// the last attempt's transport error, if any, next to the context's; tr
// is what the attempts got.
func (op *operation) interrupted(n int, err error, next io.ReadCloser, tr *tried) error {
	if next != nil {
		next.Close()
	}
	if tr.lastErr != nil {
		err = fmt.Errorf("%w (last attempt: %w)", err, tr.lastErr)
	}
	if n > 0 {
		op.written.SetReason(retrypolicy.ReasonContextDone) // not the retry the last decision planned
	}
	op.t.cfg.logInterrupted(op.ctx(), op.req(), op.key, n, err)
	return op.fail(n, err, tr.lastStatus)
}

// fail builds the error for an operation that ends without a response
// after n attempts; lastStatus is the status of the last that got one.
func (op *operation) fail(n int, err error, lastStatus int) error {
	op.body.closeUnused()
	cause := ErrNotSent
	if op.sent {
		cause = ErrOutcomeUnknown
	}
	err = retrypolicy.UnderContextErr(op.ctx(), err)
	e := &Error{Cause: cause, Key: op.errorKey(), Attempts: n, StatusCode: lastStatus, Reason: reasonOf(op.written.Reason()), Err: err}
	op.finish(n, e)
	return e
}

// ownKey returns key, and wire when it is key's text, in a text of their
// own when key is a generated key's text, op's or the Client.Do call's,
// for an operation whose hooks or logger may keep the key: one
// allocation, only for a generated key (a caller's key is the caller's
// string already).
func (op *operation) ownKey(key, wire string) (string, string) {
	if key == "" {
		return key, wire
	}
	p := unsafe.StringData(key)
	if p != &op.keyText[0] && (op.call == nil || p != &op.call.text[0]) {
		return key, wire
	}
	text := new(keyText)
	copy(text[:], key)
	own := unsafe.String(&text[0], len(key))
	if unsafe.StringData(wire) == p {
		wire = own
	}
	return own, wire
}

// errorKey returns op's key for its error: as keptKey, and a copy too
// when it is the text of the Client.Do call's generated key (see
// callContext.keptKey).
func (op *operation) errorKey() string {
	if op.call != nil {
		return op.call.keptKey(op.keptKey())
	}
	return op.keptKey()
}

// keptKey returns op's key for what may keep it after the operation (an
// error, a Client's call): a generated key whose text is op's would keep
// op, and so the first attempt's request and its buffered body, for as
// long as the key is kept; it is copied then, once.
func (op *operation) keptKey() string {
	if op.key != "" && unsafe.StringData(op.key) == &op.keyText[0] {
		op.key = strings.Clone(op.key)
	}
	return op.key
}

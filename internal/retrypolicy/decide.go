// Package retrypolicy is the client's retry policy, written once for the
// saferetry Transport and the go-retryablehttp adapter (package
// saferetryablehttp): how an attempt's outcome is classified, how long to
// wait (backoff and Retry-After), the retry budget, and [Policy.Decide], the
// decision after each attempt that weighs all of them.
//
// It reads no clock, sleeps and sends nothing: time comes in as an
// argument, so its tests run on fake time. The root package maps its
// Reason and Override values onto saferetry.Reason and saferetry.Decision.
package retrypolicy

import (
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Reason explains a [Verdict]. Each value stands for the saferetry.Reason
// constant of the same name.
type Reason uint8

// Reasons, as in saferetry.
const (
	_ Reason = iota
	ReasonFinalStatus
	ReasonReplayed
	ReasonRetryableStatus
	ReasonRetryAfter
	ReasonTransportError
	ReasonAttemptTimeout
	ReasonPermanentError
	ReasonNoKey
	ReasonBodyNotReplayable
	ReasonMaxAttempts
	ReasonBudgetExhausted
	ReasonDeadline
	ReasonContextDone
	ReasonBackoffStop
	ReasonClassifier
	ReasonServerSaid

	// NumReasons bounds the reasons: each is below it.
	NumReasons
)

// String returns r's name, the value of the saferetry.Reason constant it
// stands for ("max attempts"), or "" for the zero Reason and any value
// not below NumReasons. This is the one table of the names: the
// Transport's hooks, its errors and the go-retryablehttp adapter's
// errors all read it.
func (r Reason) String() string {
	if r >= NumReasons {
		return ""
	}
	return reasonNames[r]
}

var reasonNames = [NumReasons]string{
	ReasonFinalStatus:       "final status",
	ReasonReplayed:          "replayed",
	ReasonRetryableStatus:   "retryable status",
	ReasonRetryAfter:        "retry-after",
	ReasonTransportError:    "transport error",
	ReasonAttemptTimeout:    "attempt timeout",
	ReasonPermanentError:    "permanent error",
	ReasonNoKey:             "unsafe method without key",
	ReasonBodyNotReplayable: "body not replayable",
	ReasonMaxAttempts:       "max attempts",
	ReasonBudgetExhausted:   "retry budget exhausted",
	ReasonDeadline:          "wait would pass deadline",
	ReasonContextDone:       "context done",
	ReasonBackoffStop:       "backoff stopped",
	ReasonClassifier:        "classifier",
	ReasonServerSaid:        "server said",
}

// Override is a classifier's answer. Its values are those of
// saferetry.Decision, so that one converts to the other.
type Override uint8

// Classifier answers.
const (
	Default Override = iota // keep the built-in rule
	Retry                   // retry, within the limits
	Return                  // end the operation with this outcome
)

// Classifier adapts a saferetry.Classifier (whose Decision values are
// Override's) to [Policy.Classify]; nil stays nil.
func Classifier[D ~uint8](cl func(*http.Request, *http.Response, error) D) func(*http.Request, *http.Response, error) Override {
	if cl == nil {
		return nil
	}
	return func(req *http.Request, resp *http.Response, err error) Override { return Override(cl(req, resp, err)) }
}

// Policy is what the decision needs from a client's configuration. It is
// read-only once in use and shared by all the client's operations.
type Policy struct {
	// MaxRetryAfter caps a wait taken from Retry-After.
	MaxRetryAfter time.Duration
	// Classify, if not nil, may override the built-in rules for one attempt;
	// it is not consulted once the operation's context is done.
	Classify func(req *http.Request, resp *http.Response, err error) Override
	// Budget pays for retries; nil allows every retry.
	Budget *Budget
	// NewBackoff makes an operation's wait schedule, at its first retry;
	// Decide resets it before taking the first wait.
	NewBackoff func() backoff.BackOff
	// Jitter draws the Retry-After jitter (see [Jitter]). nil takes the
	// longest wait the jitter could give, for a caller whose own code draws
	// the wait after the decision (the go-retryablehttp adapter), so that
	// the deadline is checked against the worst case.
	Jitter func(n int64) int64
}

// Outcome is what one attempt got: a response, or an error.
type Outcome struct {
	Request  *http.Request  // the attempt's request; given to Classify
	Response *http.Response // nil when the attempt got no response
	Err      error          // the attempt's error when Response is nil
	TimedOut bool           // the attempt's own time limit expired
}

// State is what the decision knows of the operation. The caller sets the
// fields other than Progress before each decision; Decide adds to
// Progress, which the caller keeps from one decision of the operation to
// the next (with the rest of the State, or apart from it).
type State struct {
	Attempt       int       // the attempt just made, counted from 1
	MaxAttempts   int       // the attempt limit, the first included
	UnsafeNoKey   bool      // an unsafe method without a key: never retried
	NotReplayable bool      // the body cannot be sent again
	Done          bool      // the operation's context is done
	Deadline      time.Time // the operation's deadline; zero means none
	Progress
}

// Progress is what the decisions of one operation carry from one to the
// next: the budget tokens its retries took and its backoff schedule. The
// Transport keeps it in its operation and makes the rest of each
// decision's State from what the operation knows anyway, so that the
// operation holds no copy of it (see TestOperationSizeClass).
type Progress struct {
	Spent int64 // budget tokens the operation's retries took

	backoff backoff.BackOff
}

// Verdict is the decision after one attempt.
type Verdict struct {
	Retry  bool          // make another attempt after Wait
	Reason Reason        // why
	Wait   time.Duration // the wait before the next attempt; 0 on a return
	// RetryAfter is the server's Retry-After, before capping and jitter,
	// when it was honoured; else 0.
	RetryAfter time.Duration
	// Retryable says whether the built-in rules retry the outcome, before
	// the classifier and the limits.
	Retryable bool

	cost int64 // the tokens a retry took
}

// GaveUp reports whether v is a return that a limit imposed on a retry
// that the rules or the classifier asked for: the operation ends on an
// outcome it would have retried. A done context is not such a limit here:
// it ends operations whatever their outcome.
func (v Verdict) GaveUp() bool { return !v.Retry && v.Reason.Limit() }

// Limit reports whether r names a limit that stops a retry the rules or the
// classifier asked for: an unsafe method without a key, a body that cannot
// be sent again, the attempt limit, the backoff's stop, the deadline, the
// budget. This is the one list of them (saferetry.Reason.IsLimit reads it).
func (r Reason) Limit() bool {
	switch r {
	case ReasonNoKey, ReasonBodyNotReplayable, ReasonMaxAttempts, ReasonBackoffStop, ReasonDeadline, ReasonBudgetExhausted:
		return true
	}
	return false
}

// Decide is the decision after one attempt: whether to retry, why, and how
// long to wait. It applies, in order, the contract's classification of the
// outcome, the done context, the classifier, and then for a retry the
// limits that may veto it (no key on an unsafe method, a body that cannot be
// resent, the attempt count, the backoff schedule, Retry-After, the
// deadline, the budget). A retry spends its cost from the budget; a return
// with an answer the rules do not retry refills it.
//
// now is called only when a retry is planned: a final answer reads no clock.
func (p *Policy) Decide(o Outcome, st *State, now func() time.Time) Verdict {
	var v Verdict
	if o.Response != nil {
		v.Retryable, v.Reason = ClassifyStatus(o.Response)
	} else {
		v.Retryable, v.Reason = ClassifyError(o.Err, o.TimedOut)
	}
	retry := v.Retryable
	if st.Done {
		retry, v.Reason = false, ReasonContextDone
	} else if p.Classify != nil {
		if d := p.Classify(o.Request, o.Response, o.Err); d != Default {
			retry, v.Reason = d == Retry, ReasonClassifier
		}
	}
	if retry && p.plan(&v, o, st, now) {
		v.Retry = true
		return v
	}
	p.settle(v, o, &st.Progress)
	return v
}

// plan applies the limits that can veto a retry and chooses its wait. It
// records the outcome in v and reports whether the retry is made.
func (p *Policy) plan(v *Verdict, o Outcome, st *State, now func() time.Time) bool {
	switch {
	case st.UnsafeNoKey:
		v.Reason = ReasonNoKey
		return false
	case st.NotReplayable:
		v.Reason = ReasonBodyNotReplayable
		return false
	case st.Attempt >= st.MaxAttempts:
		v.Reason = ReasonMaxAttempts
		return false
	}
	if st.backoff == nil {
		// Reset, as backoff.Retry does before its first wait: an
		// ExponentialBackOff whose fields were set after it was made
		// starts from them only then.
		st.backoff = p.NewBackoff()
		st.backoff.Reset()
	}
	wait := st.backoff.NextBackOff()
	if wait == backoff.Stop {
		v.Reason = ReasonBackoffStop
		return false
	}
	t := now()
	if ra, asked, ok := RetryAfter(o.Response, t, p.MaxRetryAfter, p.Jitter); ok {
		// Retry-After is a floor, not a replacement: one that asks for
		// less than the schedule (0, a date already past) would make
		// every retry immediate and unjittered.
		wait, v.RetryAfter = max(wait, ra), asked
		if v.Reason == ReasonRetryableStatus {
			v.Reason = ReasonRetryAfter
		}
	}
	if !st.Deadline.IsZero() && !t.Add(wait).Before(st.Deadline) {
		v.Reason = ReasonDeadline
		return false
	}
	cost := p.Budget.RetryCost(o.Response == nil)
	if !p.Budget.Spend(cost) {
		v.Reason = ReasonBudgetExhausted
		return false
	}
	st.Spent += cost
	v.cost, v.Wait = cost, wait
	return true
}

// settle refills the budget when the operation ends with an answer below
// 500 that the rules do not retry: the server is up. A 5xx that is final
// (a replay, or Stripe-Should-Retry: false) does not show that.
func (p *Policy) settle(v Verdict, o Outcome, pr *Progress) {
	if o.Response != nil && !v.Retryable && o.Response.StatusCode < 500 {
		p.Budget.Succeeded(pr.Spent)
	}
}

// Forgo gives back the cost of a retry that Decide allowed and that was
// not made after all, because the operation's context ended during the
// wait: a retry budget pays for retries sent, not for waits cut short.
func (p *Policy) Forgo(v Verdict, pr *Progress) {
	p.Budget.Refund(v.cost)
	pr.Spent -= v.cost
}

// Cost is the budget tokens that v, a retry Decide allowed, took from the
// budget; 0 for a return. A caller that cannot run [Policy.Forgo] where
// it learns that the retry is not made (the go-retryablehttp adapter,
// whose wait runs in retryablehttp) refunds it with [Budget.Refund].
func (v Verdict) Cost() int64 { return v.cost }

// Veto turns a retry that Decide allowed into a return for reason, when the
// caller cannot make it after all (the next attempt's body could not be
// prepared): the retry's cost goes back to the budget, and the return
// refills it as Decide's own returns do.
func (p *Policy) Veto(v Verdict, o Outcome, pr *Progress, reason Reason) Verdict {
	p.Budget.Refund(v.cost)
	pr.Spent -= v.cost
	v.Retry, v.Reason, v.Wait, v.cost = false, reason, 0, 0
	p.settle(v, o, pr)
	return v
}

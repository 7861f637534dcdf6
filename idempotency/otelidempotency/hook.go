package otelidempotency

import (
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/otelkit"
)

// Hook returns the function to give to idempotency.WithHook: for every
// event it counts saferetry.server.requests by outcome, records
// saferetry.server.request.duration (except for answers given on admission,
// which take no time the Middleware measures), counts
// saferetry.server.takeovers, and, with WithRetriesByScope,
// saferetry.server.retries. It never reads the event's key. The function
// is safe for concurrent use.
func (in *Instrumentation) Hook() func(idempotency.Event) { return in.observe }

// observe records one event.
func (in *Instrumentation) observe(ev idempotency.Event) {
	ctx := ev.Context() // the request's: its span gets the outcome, and exemplars link to it
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(otelkit.AttrOutcome.String(string(ev.Outcome)))
		if ev.TookOver {
			span.SetAttributes(attrTookOver.Bool(true))
		}
	}
	o := in.outcomes.Get(outcomeAttrs{ev.Outcome, ev.Method, ev.Route, ev.Status}, outcomeAttrs.opts)
	in.requests.Add(ctx, 1, o.Add...)
	if !decidedOnAdmission(ev.Outcome) {
		in.requestDuration.Record(ctx, ev.Duration.Seconds(), o.Rec...)
	}
	if ev.TookOver {
		in.takeovers.Add(ctx, 1, in.routes.Get(routeAttrs{ev.Method, ev.Route}, routeAttrs.opts).Add...)
	}
	if in.retries != nil && isRetry(ev) {
		k := scopeAttrs{in.scopeLabel(ev.Key.Scope), ev.Outcome}
		in.retries.Add(ctx, 1, in.scopes.Get(k, scopeAttrs.opts).Add...)
	}
}

// decidedOnAdmission reports the outcomes answered before any store call,
// whose events carry no Duration.
func decidedOnAdmission(o idempotency.Outcome) bool {
	switch o {
	case idempotency.OutcomeMissingKey, idempotency.OutcomeMalformedKey, idempotency.OutcomeTooLarge,
		idempotency.OutcomeBadRequest, idempotency.OutcomeScopeError:
		return true
	}
	return false
}

// isRetry reports the events of a request that found its operation
// already claimed or completed with the same fingerprint (a repeat of it,
// see idempotency.Event.Repeat) and was answered with the outcome of the
// first: replayed, or answered 409 or 410. An OutcomeInProgress of a
// request whose own claim came back too late to run the handler is one
// only when the request had found the key held and waited first: without
// that, it may be the operation's first attempt.
func isRetry(ev idempotency.Event) bool {
	switch ev.Outcome {
	case idempotency.OutcomeReplay, idempotency.OutcomeOversize, idempotency.OutcomeInProgress:
		return ev.Repeat
	}
	return false
}

// outcomeAttrs are the attributes of saferetry.server.requests and
// saferetry.server.request.duration.
type outcomeAttrs struct {
	outcome       idempotency.Outcome
	method, route string
	status        int
}

func (a outcomeAttrs) opts() otelkit.Opts {
	kv := make([]attribute.KeyValue, 0, 4)
	kv = append(kv, otelkit.AttrOutcome.String(string(a.outcome)), attrMethod.String(a.method))
	if r := httpRoute(a.route); r != "" {
		kv = append(kv, attrRoute.String(r))
	}
	if a.status != 0 {
		kv = append(kv, attrStatusCode.Int(a.status))
	}
	return otelkit.NewOpts(kv...)
}

// routeAttrs are the attributes of the instruments per route.
type routeAttrs struct{ method, route string }

func (a routeAttrs) opts() otelkit.Opts {
	r := httpRoute(a.route)
	if r == "" {
		return otelkit.NewOpts(attrMethod.String(a.method))
	}
	return otelkit.NewOpts(attrMethod.String(a.method), attrRoute.String(r))
}

// httpRoute is the http.route of a ServeMux pattern: its path template,
// from the first "/", without the method (which http.request.method
// carries) or the host ("POST api.example.com/payments/{id}" is
// "/payments/{id}"), the value otelhttp gives; "" for a pattern without a
// path.
func httpRoute(pattern string) string {
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return ""
}

// scopeAttrs are the attributes of saferetry.server.retries.
type scopeAttrs struct {
	label   string
	outcome idempotency.Outcome
}

func (a scopeAttrs) opts() otelkit.Opts {
	return otelkit.NewOpts(attrScope.String(a.label), otelkit.AttrOutcome.String(string(a.outcome)))
}

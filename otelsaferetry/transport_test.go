package otelsaferetry_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/saferetry/saferetry/otelsaferetry"
)

// TestRetriedTwice is the proof of the issue: a request retried twice
// gives one operation span, three client spans under it with resend counts
// none, 1 and 2, the trace context of each on the wire, and the expected
// counter values.
func TestRetriedTwice(t *testing.T) {
	r := newRig(t)
	srv := newScript(t, 503, 429, 201) // 429 comes with Retry-After: 0
	rt := otelsaferetry.NewTransport(nil, r.options()...)

	ctx, caller := r.tp.Tracer("test").Start(context.Background(), "caller")
	status, err := post(t, ctx, rt, srv.URL)
	caller.End()
	if err != nil || status != 201 {
		t.Fatalf("got %d, %v; want 201", status, err)
	}

	spans := r.spans.Ended()
	if len(spans) != 5 {
		t.Fatalf("%d spans ended, want 5 (caller, operation, 3 attempts)", len(spans))
	}
	var op sdktrace.ReadOnlySpan
	var attempts []sdktrace.ReadOnlySpan
	for _, s := range spans {
		switch {
		case s.Name() == "caller":
		case s.SpanKind() == trace.SpanKindInternal:
			op = s
		case s.SpanKind() == trace.SpanKindClient:
			attempts = append(attempts, s)
		}
	}
	if op == nil || op.Name() != "saferetry POST" || op.Parent().SpanID() != caller.SpanContext().SpanID() {
		t.Fatalf("operation span %v, want saferetry POST under the caller's span", op)
	}
	checkOperationSpan(t, op, 3)
	if _, ok := attr(op, otelsaferetry.AttributeKey); ok {
		t.Error("the operation span carries the key without WithKeyAttribute")
	}
	checkAttemptSpans(t, srv, op, attempts)

	ms := r.collect(t)
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	common := []attribute.KeyValue{semconv.HTTPRequestMethodPost, semconv.ServerAddress("127.0.0.1"), semconv.ServerPort(port)}
	for _, c := range []struct {
		name string
		want int64
		kv   []attribute.KeyValue
	}{
		{otelsaferetry.MetricAttempts, 3, common},
		{otelsaferetry.MetricAttempts, 1, kvs("5xx", "retry", "retryable status")},
		{otelsaferetry.MetricAttempts, 1, kvs("4xx", "retry", "retry-after")},
		{otelsaferetry.MetricAttempts, 1, kvs("2xx", "return", "final status")},
		{otelsaferetry.MetricRetries, 2, common},
		{otelsaferetry.MetricRetries, 1, []attribute.KeyValue{otelsaferetry.AttributeReason.String("retry-after")}},
		{otelsaferetry.MetricGaveUp, 0, nil},
		{otelsaferetry.MetricBudgetExhausted, 0, nil},
	} {
		if got := sum(t, ms, c.name, c.kv...); got != c.want {
			t.Errorf("%s%v = %d, want %d", c.name, c.kv, got, c.want)
		}
	}
	// The waits: 1 ms of backoff after the 503, and after the 429 too: its
	// Retry-After: 0 does not shorten the backoff's wait.
	if n, s := histogram(t, ms, otelsaferetry.MetricRetryWait, common...); n != 2 || s != 0.002 {
		t.Errorf("retry.wait: %d waits, %gs in all; want 2, 0.002s", n, s)
	}
	n, s := histogram(t, ms, otelsaferetry.MetricOperationDuration,
		append(common, kvs("2xx", "", "final status")...)...)
	if n != 1 || s < 0.001 {
		t.Errorf("operation.duration: %d operations, %gs; want 1 of at least the 1 ms waited", n, s)
	}
}

// kvs are the outcome, decision and reason attributes given non-empty.
func kvs(outcome, decision, reason string) []attribute.KeyValue {
	var kv []attribute.KeyValue
	for _, a := range []attribute.KeyValue{
		otelsaferetry.AttributeOutcome.String(outcome),
		otelsaferetry.AttributeDecision.String(decision),
		otelsaferetry.AttributeReason.String(reason),
	} {
		if a.Value.AsString() != "" {
			kv = append(kv, a)
		}
	}
	return kv
}

func checkOperationSpan(t *testing.T, op sdktrace.ReadOnlySpan, attempts int64) {
	t.Helper()
	if v, _ := attr(op, otelsaferetry.AttributeAttempts); v.AsInt64() != attempts {
		t.Errorf("operation span: %d attempts, want %d", v.AsInt64(), attempts)
	}
	if v, _ := attr(op, semconv.HTTPResponseStatusCodeKey); v.AsInt64() != 201 {
		t.Errorf("operation span: status %d, want 201", v.AsInt64())
	}
	if v, _ := attr(op, otelsaferetry.AttributeReason); v.AsString() != "final status" {
		t.Errorf("operation span: reason %q, want final status", v.AsString())
	}
	if op.Status().Code == codes.Error {
		t.Errorf("operation span status %v for a 201", op.Status())
	}
}

func checkAttemptSpans(t *testing.T, srv *script, op sdktrace.ReadOnlySpan, attempts []sdktrace.ReadOnlySpan) {
	t.Helper()
	traceparents, _ := srv.seen()
	want := []struct {
		status   int64
		decision string
		reason   string
		wait     float64
	}{{503, "retry", "retryable status", 0.001}, {429, "retry", "retry-after", 0.001}, {201, "return", "final status", -1}}
	if len(attempts) != len(want) || len(traceparents) != len(want) {
		t.Fatalf("%d attempt spans, %d requests on the wire; want %d", len(attempts), len(traceparents), len(want))
	}
	for i, s := range attempts {
		w := want[i]
		ctx := fmt.Sprintf("attempt span %d", i+1)
		if s.Name() != "POST" || s.Parent().SpanID() != op.SpanContext().SpanID() {
			t.Errorf("%s: %q under %v, want POST under the operation span", ctx, s.Name(), s.Parent().SpanID())
		}
		rc, ok := attr(s, semconv.HTTPRequestResendCountKey)
		if (i == 0 && ok) || (i > 0 && rc.AsInt64() != int64(i)) {
			t.Errorf("%s: resend_count %v (set: %v), want none on the first, else %d", ctx, rc.AsInt64(), ok, i)
		}
		if v, _ := attr(s, semconv.HTTPResponseStatusCodeKey); v.AsInt64() != w.status {
			t.Errorf("%s: status %d, want %d", ctx, v.AsInt64(), w.status)
		}
		if v, _ := attr(s, otelsaferetry.AttributeDecision); v.AsString() != w.decision {
			t.Errorf("%s: decision %q, want %q", ctx, v.AsString(), w.decision)
		}
		if v, _ := attr(s, otelsaferetry.AttributeReason); v.AsString() != w.reason {
			t.Errorf("%s: reason %q, want %q", ctx, v.AsString(), w.reason)
		}
		if v, ok := attr(s, otelsaferetry.AttributeRetryWait); (w.wait < 0) == ok || (ok && v.AsFloat64() != w.wait) {
			t.Errorf("%s: wait %v (set: %v), want %v", ctx, v.AsFloat64(), ok, w.wait)
		}
		if (s.Status().Code == codes.Error) != (w.status >= 400) {
			t.Errorf("%s: span status %v for %d", ctx, s.Status(), w.status)
		}
		sc := s.SpanContext()
		if tp := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; traceparents[i] != tp {
			t.Errorf("%s: the server saw traceparent %q, want %q", ctx, traceparents[i], tp)
		}
	}
}

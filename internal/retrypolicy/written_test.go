package retrypolicy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"testing"
	"time"
)

type ctxKey struct{}

// TestWrittenIsTheTraceContext: with no trace in the context it is given,
// Trace returns the Written itself as the context, which net/http must
// find the trace in, and which must behave as the context it wraps:
// values, cancellation (a child context cancelled with it at once, not by
// a goroutine watching it), traces added downstream.
func TestWrittenIsTheTraceContext(t *testing.T) {
	if traceKey == nil {
		t.Fatal("httptrace's context key could not be learnt: every Trace allocates a context of its own")
	}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	defer cancel()
	w := new(Written)
	ctx := w.Trace(parent)
	if ctx != context.Context(w) {
		t.Fatalf("Trace returned %T, want the Written itself", ctx)
	}
	if tr := httptrace.ContextClientTrace(ctx); tr != &w.trace {
		t.Fatalf("httptrace finds trace %p, want the Written's %p", tr, &w.trace)
	}
	if v := ctx.Value(ctxKey{}); v != "v" {
		t.Fatalf("Value = %v, want the parent's v", v)
	}

	httptrace.ContextClientTrace(ctx).GetConn("api.test:443")
	if w.Load() || !w.NoConn() {
		t.Fatalf("after GetConn alone, Load = %v, NoConn = %v; want false, true", w.Load(), w.NoConn())
	}
	httptrace.ContextClientTrace(ctx).GotConn(httptrace.GotConnInfo{})
	if !w.Load() || w.NoConn() {
		t.Fatalf("after GetConn and GotConn, Load = %v, NoConn = %v; want true, false", w.Load(), w.NoConn())
	}
	w.Reset()
	if w.Load() || w.NoConn() {
		t.Fatal("Reset did not clear the marks")
	}

	// A trace added downstream (by a base such as otelhttp) runs its own
	// hook and the Written's.
	var downstream int
	ctx2 := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { downstream++ }})
	httptrace.ContextClientTrace(ctx2).GotConn(httptrace.GotConnInfo{})
	if downstream != 1 || !w.Load() {
		t.Fatalf("a downstream trace's hook ran %d times, Written marked %v; want 1, true", downstream, w.Load())
	}

	child, cancelChild := context.WithTimeout(ctx, time.Hour)
	defer cancelChild()
	cancel()
	if child.Err() == nil {
		t.Fatal("a child of the Written was not cancelled at once with its parent")
	}
	if ctx.Err() != context.Canceled {
		t.Fatalf("Err = %v, want the parent's", ctx.Err())
	}
}

// TestWrittenComposesATraceAlreadyThere: a caller's own trace in the
// context keeps running, once per event, beside the Written's; the
// context Trace returns is the Written all the same (the Transport's
// operation takes its Written for its context).
func TestWrittenComposesATraceAlreadyThere(t *testing.T) {
	var callers int
	parent := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { callers++ }})
	w := new(Written)
	ctx := w.Trace(parent)
	if ctx != context.Context(w) {
		t.Fatalf("Trace returned %T, want the Written itself", ctx)
	}
	httptrace.ContextClientTrace(ctx).GotConn(httptrace.GotConnInfo{})
	if callers != 1 || !w.Load() {
		t.Fatalf("the caller's hook ran %d times, Written marked %v; want 1, true", callers, w.Load())
	}
}

// TestWrittenTraceAllocatesOnlyItsHooks: the trace costs two allocations
// (its GetConn and GotConn hooks) when the context holds no trace yet.
func TestWrittenTraceAllocatesOnlyItsHooks(t *testing.T) {
	ws := make([]Written, 201)
	i := 0
	ctx := context.Background()
	n := testing.AllocsPerRun(200, func() {
		_ = ws[i].Trace(ctx)
		i++
	})
	if n > 2 {
		t.Fatalf("Trace allocates %.0f times, want 2", n)
	}
}

// TestWrittenPrintsWithoutReadingItsMark: a logger that prints an
// attempt's context, with any verb, while the base's hook or the next
// attempt's Reset writes the mark, reads none of the Written's fields
// (-race; found by a review helper), and names the context after its
// parent.
func TestWrittenPrintsWithoutReadingItsMark(t *testing.T) {
	w := new(Written)
	ctx := w.Trace(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2000 {
			w.Reset()
			httptrace.ContextClientTrace(ctx).GotConn(httptrace.GotConnInfo{})
		}
	}()
	const want = "context.Background.WithClientTrace(saferetry)"
	for range 50 {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%q"} {
			if got := fmt.Sprintf(verb, ctx); got != want {
				t.Fatalf("Sprintf(%q) = %q, want %q", verb, got, want)
			}
		}
	}
	<-done
}

// TestWrittenHidesItsKey: a context made on the Written shows nothing
// under CallKey, whether the Written is the context or, with a trace already
// in the parent, the trace is composed; other values still show.
func TestWrittenHidesItsKey(t *testing.T) {
	parent := context.WithValue(context.WithValue(context.Background(), CallKey{}, "call"), ctxKey{}, "v")
	withTrace := httptrace.WithClientTrace(parent, &httptrace.ClientTrace{})
	for name, p := range map[string]context.Context{"plain": parent, "traced": withTrace} {
		w := new(Written)
		ctx, cancel := context.WithCancel(w.Trace(p))
		if v := ctx.Value(CallKey{}); v != nil {
			t.Errorf("%s: the hidden key shows %v", name, v)
		}
		if v := ctx.Value(ctxKey{}); v != "v" {
			t.Errorf("%s: another key shows %v, want v", name, v)
		}
		cancel()
	}
}

// TestWrittenKeepsTheCallersDialHooks: a caller's trace in the context
// with hooks of the net package's dial (ConnectStart, ConnectDone) keeps
// them through a Written, whose context does not keep the one that
// httptrace composes (Trace): a real dial over loopback runs each once,
// and the caller's GotConn and the Written's mark too.
func TestWrittenKeepsTheCallersDialHooks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	var starts, dones, gots int
	parent := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		ConnectStart: func(string, string) { starts++ },
		ConnectDone:  func(string, string, error) { dones++ },
		GotConn:      func(httptrace.GotConnInfo) { gots++ },
	})
	w := new(Written)
	req, err := http.NewRequestWithContext(w.Trace(parent), http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if starts != 1 || dones != 1 || gots != 1 || !w.Load() {
		t.Fatalf("ConnectStart ran %d times, ConnectDone %d, the caller's GotConn %d, Written marked %v; want 1, 1, 1, true",
			starts, dones, gots, w.Load())
	}
}

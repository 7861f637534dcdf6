package otelidempotency_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/idempotency/otelidempotency"
)

// meter is an SDK MeterProvider with a manual reader, shut down at cleanup.
type meter struct {
	provider *sdkmetric.MeterProvider
	reader   *sdkmetric.ManualReader
}

func newMeter(t testing.TB) meter {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return meter{provider: mp, reader: r}
}

// collect reads every instrument of the Instrumentation's scope.
func (m meter) collect(t testing.TB) metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := m.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("Collect: %v", err)
	}
	out := metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelidempotency.ScopeName {
			continue
		}
		for _, mt := range sm.Metrics {
			out[mt.Name] = mt
		}
	}
	return out
}

// metrics are the collected instruments by name.
type metrics map[string]metricdata.Metrics

// matches reports whether set holds every attribute of want; a want value
// of attribute.INVALID type stands for "absent".
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if kv.Value.Type() == attribute.INVALID {
			if ok {
				return false
			}
			continue
		}
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// absent stands for an attribute that must not be there.
func absent(k string) attribute.KeyValue { return attribute.KeyValue{Key: attribute.Key(k)} }

// point is one data point of an instrument: of a counter or
// updowncounter its value, of a histogram its count.
type point struct {
	attrs attribute.Set
	sum   int64
	count uint64
}

// points lists the points of instrument name whose attributes match want.
func (ms metrics) points(name string, want []attribute.KeyValue) []point {
	var out []point
	keep := func(p point) {
		if matches(p.attrs, want) {
			out = append(out, p)
		}
	}
	switch d := ms[name].Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			keep(point{attrs: dp.Attributes, sum: dp.Value})
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			keep(point{attrs: dp.Attributes, count: dp.Count})
		}
	}
	return out
}

// sum adds up the points of the counter or updowncounter name whose
// attributes match want.
func (ms metrics) sum(name string, want ...attribute.KeyValue) int64 {
	var n int64
	for _, p := range ms.points(name, want) {
		n += p.sum
	}
	return n
}

// count adds up the counts of the histogram name whose attributes match
// want.
func (ms metrics) count(name string, want ...attribute.KeyValue) uint64 {
	var n uint64
	for _, p := range ms.points(name, want) {
		n += p.count
	}
	return n
}

// everyAttribute lists every attribute value of every point of every
// instrument, for the key check.
func (ms metrics) everyAttribute() []string {
	var out []string
	for name := range ms {
		for _, p := range ms.points(name, nil) {
			for _, kv := range p.attrs.ToSlice() {
				out = append(out, string(kv.Key)+"="+kv.Value.Emit())
			}
		}
	}
	return out
}

func newStore(t testing.TB) *memstore.Store {
	t.Helper()
	s := memstore.New()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// app answers 201 with the request body, or the status that before returns
// (0 keeps 201); before may block.
type app struct {
	before func(r *http.Request) int
}

func (a app) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status := http.StatusCreated
	if a.before != nil {
		if s := a.before(r); s != 0 {
			status = s
		}
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"got":%q}`, body)
}

// serve returns a mux with POST /payments behind the Middleware, store and
// the Instrumentation's three parts.
func serve(in *otelidempotency.Instrumentation, store idempotency.Store, a http.Handler, opts ...idempotency.Option) http.Handler {
	opts = append([]idempotency.Option{idempotency.WithHook(in.Hook())}, opts...)
	mw := idempotency.Middleware(in.WrapStore(store, "test"), opts...)
	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw(in.Handler(a)))
	return mux
}

// post sends one POST /payments through h.
func post(h http.Handler, key, body string) *httptest.ResponseRecorder {
	return postWith(h, key, body)
}

// postWith is post with headers, given as name, value pairs.
func postWith(h http.Handler, key, body string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	if key != "" {
		r.Header.Set(idempotency.HeaderIdempotencyKey, key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func outcome(o idempotency.Outcome) attribute.KeyValue {
	return attribute.String("saferetry.outcome", string(o))
}

func status(code int) attribute.KeyValue { return attribute.Int("http.response.status_code", code) }

var route = attribute.String("http.route", "/payments")

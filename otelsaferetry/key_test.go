package otelsaferetry_test

import (
	"context"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/otelsaferetry"
)

// TestKeyAttribute shows the key on the operation span only when asked
// for, and never in a metric.
func TestKeyAttribute(t *testing.T) {
	for _, on := range []bool{false, true} {
		r := newRig(t)
		srv := newScript(t, 503, 201)
		rt := otelsaferetry.NewTransport(nil, r.options(otelsaferetry.WithKeyAttribute(on))...)
		if _, err := post(t, context.Background(), rt, srv.URL); err != nil {
			t.Fatal(err)
		}
		_, keys := srv.seen()
		if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
			t.Fatalf("the server saw keys %q, want one key twice", keys)
		}
		var got []string
		for _, s := range r.spans.Ended() {
			if v, ok := attr(s, otelsaferetry.AttributeKey); ok {
				got = append(got, s.Name()+"="+v.AsString())
			}
		}
		want := 0
		if on {
			want = 1
			if len(got) == 1 && got[0] != "saferetry POST="+keys[0] {
				t.Errorf("WithKeyAttribute(true): %q, want the key on the operation span", got)
			}
		}
		if len(got) != want {
			t.Errorf("WithKeyAttribute(%v): key on %q, want %d span(s)", on, got, want)
		}
		for name, agg := range r.collect(t) {
			for _, set := range attributeSets(agg) {
				for _, kv := range set.ToSlice() {
					if kv.Key == otelsaferetry.AttributeKey || kv.Value.Emit() == keys[0] {
						t.Errorf("WithKeyAttribute(%v): metric %s has the key in %v", on, name, kv)
					}
				}
			}
		}
	}
}

// attributeSets are the attribute sets of agg's data points.
func attributeSets(agg metricdata.Aggregation) []attribute.Set {
	var out []attribute.Set
	switch a := agg.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range a.DataPoints {
			out = append(out, dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range a.DataPoints {
			out = append(out, dp.Attributes)
		}
	}
	return out
}

// TestKeyNotInSpansUnlessAsked: without WithKeyAttribute, the key is in
// no span, also not in the status of an operation that ends in an error,
// whose text (saferetry.Error's) names the key.
func TestKeyNotInSpansUnlessAsked(t *testing.T) {
	const key = "customer-42-order-7"
	r := newRig(t)
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, syscall.ECONNRESET
	})
	rt := otelsaferetry.NewTransport(base, r.options()...)
	_, err := post(t, saferetry.WithKey(context.Background(), key), rt, "http://api.test/v1/debits")
	if err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("err = %v, want an error naming the key (the premise of this test)", err)
	}
	if len(r.spans.Ended()) == 0 {
		t.Fatal("no span ended")
	}
	for _, s := range r.spans.Ended() {
		if strings.Contains(s.Status().Description, key) {
			t.Errorf("span %s status %q has the key", s.Name(), s.Status().Description)
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), key) {
				t.Errorf("span %s attribute %v has the key", s.Name(), kv)
			}
		}
		for _, ev := range s.Events() {
			for _, kv := range ev.Attributes {
				if strings.Contains(kv.Value.Emit(), key) {
					t.Errorf("span %s event %s attribute %v has the key", s.Name(), ev.Name, kv)
				}
			}
		}
	}
}

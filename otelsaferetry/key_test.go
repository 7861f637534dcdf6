package otelsaferetry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

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

package otelidempotency

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The attribute keys, documented in the package documentation's table.
// The HTTP ones are those of the OpenTelemetry semantic conventions.
const (
	attrOutcome    = attribute.Key("saferetry.outcome")
	attrTookOver   = attribute.Key("saferetry.took_over")
	attrScope      = attribute.Key("saferetry.scope")
	attrStoreOp    = attribute.Key("saferetry.store.operation")
	attrStoreName  = attribute.Key("saferetry.store.name")
	attrMethod     = attribute.Key("http.request.method")
	attrRoute      = attribute.Key("http.route")
	attrStatusCode = attribute.Key("http.response.status_code")
	attrErrorType  = attribute.Key("error.type")
)

// measureOpts are the options of one attribute set, made once so that a
// measurement with a known set allocates nothing: the variadic slices are
// ready-made, since an interface call lets nothing stay on the stack.
type measureOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newMeasureOpts(attrs ...attribute.KeyValue) measureOpts {
	o := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return measureOpts{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

// maxCached bounds each cache of attribute sets. The sets are bounded by
// the application's routes, methods and statuses (and the scope labels it
// chose), so the bound is only a guard: past it, sets are made per
// measurement, correct but slower.
const maxCached = 1024

// optsCache keeps the measureOpts of the attribute sets seen so far. It is
// safe for concurrent use; the zero value is empty and ready.
type optsCache[K comparable] struct {
	mu sync.RWMutex
	m  map[K]measureOpts
}

// get returns the options of k, made by build the first time.
func (c *optsCache[K]) get(k K, build func(K) measureOpts) measureOpts {
	c.mu.RLock()
	o, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return o
	}
	o = build(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[K]measureOpts)
	}
	if len(c.m) < maxCached {
		c.m[k] = o
	}
	return o
}

package otelkit

import (
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Opts are the measurement options of one attribute set, made once so that
// a measurement with a known set allocates nothing: the variadic slices are
// ready-made, since an interface call lets nothing stay on the stack. Pass
// Add to a counter's Add, Rec to a histogram's Record.
type Opts struct {
	Add []metric.AddOption
	Rec []metric.RecordOption
}

// NewOpts returns the options of the set of attrs.
func NewOpts(attrs ...attribute.KeyValue) Opts {
	o := metric.WithAttributeSet(attribute.NewSet(attrs...))
	return Opts{Add: []metric.AddOption{o}, Rec: []metric.RecordOption{o}}
}

// MaxCached bounds each Cache. The sets are bounded by what the
// application measures (its routes, methods, statuses, servers), so the
// bound is only a guard: past it, sets are made per measurement, correct
// but slower.
const MaxCached = 1024

// Cache keeps the Opts of the attribute sets seen so far, by a key that
// names the set. It is safe for concurrent use; the zero value is empty
// and ready.
type Cache[K comparable] struct {
	mu sync.RWMutex
	m  map[K]Opts
}

// Get returns the options of k, made by build the first time.
func (c *Cache[K]) Get(k K, build func(K) Opts) Opts {
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
		c.m = make(map[K]Opts)
	}
	if len(c.m) < MaxCached {
		c.m[k] = o
	}
	return o
}

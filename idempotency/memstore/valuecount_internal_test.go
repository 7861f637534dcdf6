package memstore

import (
	"net/http"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestValueCount: a stored response reads the count of its header's
// values from its bytes (see valueCount), the count its view's array of
// values is made with: nil and empty value lists, empty values, and
// lengths that take a multi-byte uvarint included.
func TestValueCount(t *testing.T) {
	long := strings.Repeat("v", 300)
	for _, h := range []http.Header{
		nil,
		{},
		{"A": nil, "B": {}},
		{"Content-Type": {"application/json"}},
		{"Vary": {"Accept", "", long}, strings.Repeat("X", 200): {long}, "E": {""}, "F": nil},
	} {
		want := 0
		for _, vv := range h {
			want += len(vv)
		}
		r := newResponse(&idempotency.Response{Status: 200, Header: h, Body: []byte(long[:7])})
		if got := r.valueCount(); got != want {
			t.Errorf("%v: valueCount = %d, want %d", h, got, want)
		}
	}
}

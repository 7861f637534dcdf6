package memstore

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestResponseRoundTrip: a response packed into its bytes comes back, as a
// replay's view and as Get's copy, equal to the one given, nil and empty
// told apart, lengths that take a multi-byte uvarint included; and no
// appended value reaches the store.
func TestResponseRoundTrip(t *testing.T) {
	long := strings.Repeat("v", 300) // a 2-byte length
	cases := []struct {
		name string
		resp idempotency.Response
	}{
		{"status only", idempotency.Response{Status: 204}},
		{"oversize marker", idempotency.Response{Status: 201, Oversize: true}},
		{"empty body", idempotency.Response{Status: 200, Body: []byte{}}},
		{"empty header", idempotency.Response{Status: 200, Header: http.Header{}, Body: []byte("x")}},
		{"nil and empty values", idempotency.Response{Status: 200, Header: http.Header{"A": nil, "B": {}}}},
		{"the mock server's answer", idempotency.Response{Status: 201,
			Header: http.Header{"Content-Type": {"application/json"}, "Location": {"/payments/pay_0123456789abcdef"}},
			Body:   []byte(`{"id":"pay_0123456789abcdef","amount":1}` + "\n")}},
		{"many values, long ones", idempotency.Response{Status: 200,
			Header: http.Header{"Vary": {"Accept", "", long}, strings.Repeat("X", 200): {long}, "E": {""}},
			Body:   []byte(long)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newResponse(&c.resp)
			for name, got := range map[string]*idempotency.Response{"export": r.export(),
				"view": {Status: int(r.status), Oversize: r.oversize, Body: r.body(), Header: r.httpHeader()}} {
				if !reflect.DeepEqual(*got, c.resp) {
					t.Errorf("%s = %#v, want %#v", name, *got, c.resp)
				}
				for k, vv := range got.Header {
					if len(vv) != cap(vv) {
						t.Errorf("%s: the values of %q have room to append in place", name, k)
					}
				}
				if len(got.Body) != cap(got.Body) && name == "view" {
					t.Errorf("view: the body has room to append in place")
				}
			}
			// The struct takes a 64-byte class apart from its bytes, its
			// own size packed with them (see allocResponse).
			structSize := int64(64)
			if r.packed {
				structSize = int64(responseSize)
			}
			if r.fields >= 0 && r.size() != responseOverhead-64+structSize+int64(cap(r.data)) {
				t.Errorf("size = %d without a view", r.size())
			}
		})
	}
}

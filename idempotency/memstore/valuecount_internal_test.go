package memstore

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestReplayedHeaderIsStored: the header a replay gives, from Claim's
// shared view made by whichever concurrent first replay gets there and
// from Get's copy, is the header stored: many values, empty values, a
// field of no values (nil) and one of an empty list kept apart.
func TestReplayedHeaderIsStored(t *testing.T) {
	many := make([]string, 300)
	for i := range many {
		many[i] = strings.Repeat("v", i%7)
	}
	stored := http.Header{"Many": many, "Nil": nil, "Empty": {}, "Blank": {""}, "X-Long": {strings.Repeat("l", 200)}}
	ctx := context.Background()
	s := New()
	defer s.Close()
	k := idempotency.Key{Scope: "s", Key: "k"}
	res, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
	if err != nil || !res.Acquired {
		t.Fatalf("Claim: %+v, %v", res, err)
	}
	if err := s.Complete(ctx, k, res.Token, idempotency.Response{Status: 201, Header: stored, Body: []byte("b")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]http.Header, 8)
	for i := range got {
		wg.Go(func() {
			r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
			if err != nil || r.Entry.Response == nil {
				t.Errorf("replay: %+v, %v", r, err)
				return
			}
			got[i] = r.Entry.Response.Header
		})
	}
	wg.Wait()
	e, _, err := s.Get(ctx, k)
	if err != nil || e.Response == nil {
		t.Fatalf("Get: %+v, %v", e, err)
	}
	for i, h := range append(got, e.Response.Header) {
		if !reflect.DeepEqual(h, stored) {
			t.Errorf("replay %d: header %q, want %q", i, h, stored)
		}
	}
}

package idempotency_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// scribbler is a ResponseWriter that, like a careless outer middleware,
// changes the header values it was given in place, both when the status is
// written and after the handler returned.
type scribbler struct{ *httptest.ResponseRecorder }

func (s scribbler) scribble() {
	for name, v := range s.Header() {
		for i := range v {
			v[i] = "scribbled"
		}
		if cap(v) > len(v) {
			s.Header()[name] = append(v, "appended")
		}
	}
}

func (s scribbler) WriteHeader(code int) {
	s.scribble()
	s.ResponseRecorder.WriteHeader(code)
}

// TestReplayHeadersNotShared: a writer that changes the header values of a
// replay in place, or appends to them, leaves the stored outcome as it was:
// the next replay carries the original headers.
func TestReplayHeadersNotShared(t *testing.T) {
	h := idempotency.Middleware(newStore(t))(&counter{})
	first := post(h, "k", `{}`)
	if first.Code != http.StatusCreated {
		t.Fatalf("first: %d", first.Code)
	}
	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/ops?b=2&a=1", strings.NewReader(`{}`)) // as post sends it
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(idempotency.HeaderIdempotencyKey, "k")
		w := scribbler{httptest.NewRecorder()}
		h.ServeHTTP(w, r)
		if w.Code != http.StatusCreated || w.Body.String() != first.Body.String() {
			t.Fatalf("scribbled replay: %d %s; want the first outcome", w.Code, w.Body)
		}
		w.scribble()
	}
	again := post(h, "k", `{}`)
	for _, name := range []string{"Content-Type", "Location"} {
		if got, want := again.Header()[name], first.Header()[name]; len(got) != 1 || got[0] != want[0] {
			t.Errorf("replay's %s = %q after writers scribbled on earlier replays; want %q", name, got, want)
		}
	}
	if got := again.Header()[idempotency.HeaderReplayed]; len(got) != 1 || got[0] != "true" {
		t.Errorf("replay's %s = %q; want true", idempotency.HeaderReplayed, got)
	}
	if again.Body.String() != first.Body.String() {
		t.Errorf("replay body %q; want %q", again.Body, first.Body)
	}
}

// TestStoredHeadersNotCarriedOver: answers with a header that is not kept
// (Content-Length, Date) have their kept headers gathered into a map the
// Middleware reuses; each outcome is stored with its own headers only,
// none left over from the answer before it.
func TestStoredHeadersNotCarriedOver(t *testing.T) {
	kept := []string{"Location", "Etag", "Link"}
	h := idempotency.Middleware(newStore(t))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Each key's answer sets one kept header of its own, beside two
		// that are not kept.
		name := kept[len(r.Header.Get(idempotency.HeaderIdempotencyKey))%len(kept)]
		w.Header().Set(name, "v-"+name)
		w.Header().Set("Content-Length", "2")
		w.Header().Set("Date", "Mon, 02 Jan 2006 15:04:05 GMT")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("ok"))
	}))
	keys := []string{"k", "kk", "kkk", "kkkk"}
	for _, k := range keys {
		if w := post(h, k, `{}`); w.Code != http.StatusCreated {
			t.Fatalf("first %s: %d", k, w.Code)
		}
	}
	for _, k := range keys {
		w := post(h, k, `{}`)
		want := kept[len(k)%len(kept)]
		for _, name := range kept {
			got := w.Header().Get(name)
			switch {
			case name == want && got != "v-"+name:
				t.Errorf("replay of %s: %s = %q; want %q", k, name, got, "v-"+name)
			case name != want && got != "":
				t.Errorf("replay of %s carries %s = %q from another answer", k, name, got)
			}
		}
	}
}

// TestReplayMultiValuedHeaders: a kept header with several values is
// replayed with all of them, in order, beside the single-valued ones, and
// every name's values are its own: appending to one name's slice changes
// no other name's values, on this replay or the next.
func TestReplayMultiValuedHeaders(t *testing.T) {
	links := []string{`</a>; rel="a"`, `</b>; rel="b"`, `</c>; rel="c"`}
	h := idempotency.Middleware(newStore(t))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for _, l := range links {
			w.Header().Add("Link", l)
		}
		w.Header().Set("Location", "/ops/1")
		w.Header().Add("Etag", `"1"`)
		w.Header().Add("Etag", `"2"`)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{}`))
	}))
	want := map[string][]string{
		"Content-Type": {"application/json"}, "Link": links, "Location": {"/ops/1"},
		"Etag": {`"1"`, `"2"`}, idempotency.HeaderReplayed: {"true"}, "Content-Length": {"2"},
	}
	post(h, "k", `{}`)
	for i := range 2 {
		w := post(h, "k", `{}`)
		if w.Code != http.StatusCreated {
			t.Fatalf("replay %d: %d", i, w.Code)
		}
		got := w.Header()
		for name, vv := range want {
			if !slices.Equal(got[name], vv) {
				t.Errorf("replay %d: %s = %q; want %q", i, name, got[name], vv)
			}
		}
		for name, vv := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("replay %d carries %s = %q", i, name, vv)
			}
			_ = append(vv, "appended") // would write into the next name's values if not capped
		}
		for name, vv := range want {
			if !slices.Equal(got[name], vv) {
				t.Errorf("replay %d: after appending to every name, %s = %q; want %q", i, name, got[name], vv)
			}
		}
	}
}

// TestStoredHeadersCodingNames: Content-Encoding and Vary, which the
// default allow-list leaves out, are stored and replayed exactly when the
// answer labels its body with a coding, under a name in any case, and
// never for a body without one (an empty Content-Encoding names none).
func TestStoredHeadersCodingNames(t *testing.T) {
	for _, c := range []struct {
		name string
		set  http.Header
		want http.Header
	}{
		{"no coding", http.Header{"Content-Type": {"text/plain"}, "Vary": {"Accept-Encoding"}},
			http.Header{"Content-Type": {"text/plain"}}},
		{"empty coding", http.Header{"Vary": {"Accept-Encoding"}, "Content-Encoding": {}},
			http.Header{}},
		{"coding", http.Header{"Content-Type": {"text/plain"}, "Vary": {"Accept-Encoding"}, "Content-Encoding": {"gzip"}},
			http.Header{"Content-Type": {"text/plain"}, "Vary": {"Accept-Encoding"}, "Content-Encoding": {"gzip"}}},
		{"coding only", http.Header{"Content-Encoding": {"gzip"}},
			http.Header{"Content-Encoding": {"gzip"}}},
		{"coding in lower case", http.Header{"Vary": {"Accept-Encoding"}, "content-encoding": {"gzip"}},
			http.Header{"Vary": {"Accept-Encoding"}, "Content-Encoding": {"gzip"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := newStore(t)
			h := idempotency.Middleware(store)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range c.set {
					w.Header()[k] = v
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte("body"))
			}))
			post(h, "k", `{}`)
			e, ok, err := store.Get(context.Background(), idempotency.Key{Key: "k"})
			if err != nil || !ok || e.Response == nil {
				t.Fatalf("stored entry: %v, %v, %v", e, ok, err)
			}
			if stored := e.Response.Header; len(stored) != len(c.want) || (len(stored) > 0 && !reflect.DeepEqual(stored, c.want)) {
				t.Errorf("stored headers %v; want %v", stored, c.want)
			}
			w := post(h, "k", `{}`)
			if w.Header().Get(idempotency.HeaderReplayed) != "true" {
				t.Fatalf("second answer is not a replay: %d %v", w.Code, w.Header())
			}
			got := w.Header().Clone()
			delete(got, idempotency.HeaderReplayed)
			delete(got, "Content-Length")
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("replay's headers %v; want %v", got, c.want)
			}
		})
	}
}

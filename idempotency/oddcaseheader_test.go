package idempotency_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestReplayKeepsHeadersSetUnderNonCanonicalNames: a handler may put a
// header in the map under a name that is not in canonical form (ETag as
// RFC 9110 spells it, a lowercase name); net/http sends it as it is, and
// the client reads names without regard to case. Such a header is kept and
// replayed when its canonical name is: the replay of an ETag, a Location
// or the Content-Encoding of an encoded body must not lose it (a body
// replayed without its coding is undecodable), while a Set-Cookie is never
// replayed whatever its case. The replay sends the names in canonical form.
func TestReplayKeepsHeadersSetUnderNonCanonicalNames(t *testing.T) {
	h := idempotency.Middleware(newStore(t))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["ETag"] = []string{`"v1"`}
		h["location"] = []string{"/ops/1"}
		h["content-encoding"] = []string{"x-custom"}
		h["vary"] = []string{"Accept-Encoding"}
		h["set-cookie"] = []string{"session=first"}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("encoded bytes"))
	}))
	first := post(h, "k-case", `{}`)
	if first.Code != http.StatusCreated {
		t.Fatalf("first: %d", first.Code)
	}
	again := post(h, "k-case", `{}`)
	wantReplay(t, again, first)
	// Names are compared without regard to case, as clients read them
	// (the replay carries them in canonical form).
	for _, name := range []string{"ETag", "location", "content-encoding", "vary"} {
		if got, want := again.Header().Values(name), first.Header()[name]; !slices.Equal(got, want) {
			t.Errorf("replay's %s = %q; want %q, as the first answer had it", name, got, want)
		}
	}
	if got := again.Header().Values("set-cookie"); got != nil {
		t.Errorf("replay carries set-cookie %q; a cookie is never replayed", got)
	}
}

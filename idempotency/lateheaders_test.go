package idempotency_test

import (
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestReplayCarriesTheFirstAnswersHeaders: the headers of a replay are
// those of the first answer, also when the handler set some after
// WriteHeader (the Middleware sends its header when the handler returns,
// so they go out with the first answer too, as the package documentation
// says) and when a handler around the Middleware removed a header net/http
// would add (Date, or a sniffed Content-Type, both set to nil): it does so
// on every request, replays included.
func TestReplayCarriesTheFirstAnswersHeaders(t *testing.T) {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		w.Header().Set("ETag", `"late"`)
		w.Header().Set("Location", "/ops/late")
		_, _ = io.WriteString(w, "<html>sniffable")
	})
	mw := idempotency.Middleware(newStore(t))(app)
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Date"] = nil
		w.Header()["Content-Type"] = nil
		mw.ServeHTTP(w, r)
	})
	do := overWire(t, outer)
	first, fb := do("k-headers")
	again, ab := do("k-headers")
	if again.Header.Get(idempotency.HeaderReplayed) != "true" || ab != fb {
		t.Fatalf("second answer %d %q is no replay of %q", again.StatusCode, ab, fb)
	}
	for _, name := range []string{"Etag", "Location", "Date", "Content-Type", "Content-Length"} {
		if f, a := first.Header[name], again.Header[name]; !slices.Equal(f, a) {
			t.Errorf("%s: %q on the first answer, %q on the replay", name, f, a)
		}
	}
	if first.Header.Get("Etag") != `"late"` {
		t.Errorf("ETag set after WriteHeader: %q on the first answer, want it sent", first.Header.Get("Etag"))
	}
}

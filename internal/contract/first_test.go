package contract

import (
	"net/http"
	"net/textproto"
	"testing"
)

// First indexes the header map with the name as given, so every name it is
// used with must be canonical, and then it agrees with http.Header.Get.
func TestFirstAgreesWithGet(t *testing.T) {
	for _, name := range []string{HeaderKey, HeaderReplayed, HeaderShouldRetry} {
		if c := textproto.CanonicalMIMEHeaderKey(name); c != name {
			t.Errorf("%q is not canonical (%q): First would miss it", name, c)
		}
		h := http.Header{}
		if got := First(h, name); got != "" {
			t.Errorf("First(empty, %q) = %q", name, got)
		}
		h.Add(name, "a")
		h.Add(name, "b")
		if got, want := First(h, name), h.Get(name); got != want || got != "a" {
			t.Errorf("First(%q) = %q, Get = %q", name, got, want)
		}
	}
}

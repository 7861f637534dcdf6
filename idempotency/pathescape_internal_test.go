package idempotency

import "testing"

func TestUpperEscapes(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"/pay":             "/pay",
		"/a%2Fb":           "/a%2Fb",
		"/a%2fb":           "/a%2Fb",
		"%c3%a9":           "%C3%A9",
		"/%aA/%Ab/x%ff":    "/%AA/%AB/x%FF",
		"/abc%2f":          "/abc%2F",
		"/%%2f%":           "/%%2F%",
		"/%zz%2f%a":        "/%zz%2F%a",
		"/%g1/%1g/%2fcafe": "/%g1/%1g/%2Fcafe",
	} {
		if got := upperEscapes(in); got != want {
			t.Errorf("upperEscapes(%q) = %q, want %q", in, got, want)
		}
	}
}

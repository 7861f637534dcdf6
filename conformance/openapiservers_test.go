package conformance_test

import (
	"os"
	"testing"

	"github.com/saferetry/saferetry/conformance"
)

// TestFromOpenAPIServerOverrides: a path item's servers, and an
// operation's, replace the document's for its operations (as Stripe's
// description sends file uploads to another host): the operation is sent
// there, its variables at their defaults, a relative one resolved against
// the document's URL; a base URL given (-url) still wins over all.
func TestFromOpenAPIServerOverrides(t *testing.T) {
	doc, err := os.ReadFile("testdata/openapi/servers-override.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		base string
		want map[string]string
	}{
		{"", map[string]string{
			"PostCharges": "https://api.example.com/v1/charges",
			"PostFiles":   "https://files.example.com/v1/files",
			"PutFiles":    "https://eu.uploads.example.com/u/v1/files",
			"PostExports": "https://docs.example.com/bulk/v1/exports",
		}},
		{"http://127.0.0.1:9", map[string]string{
			"PostCharges": "http://127.0.0.1:9/v1/charges",
			"PostFiles":   "http://127.0.0.1:9/v1/files",
			"PutFiles":    "http://127.0.0.1:9/v1/files",
			"PostExports": "http://127.0.0.1:9/v1/exports",
		}},
	} {
		ops, err := conformance.FromOpenAPI(doc, "https://docs.example.com/spec/openapi.json", tc.base)
		if err != nil || len(ops) != len(tc.want) {
			t.Fatalf("base %q: FromOpenAPI: %v, %d operations", tc.base, err, len(ops))
		}
		for _, o := range ops {
			if got := o.Target.URL; got != tc.want[o.Target.Name] {
				t.Errorf("base %q: %s URL %s, want %s", tc.base, o.Target.Name, got, tc.want[o.Target.Name])
			}
		}
	}
}

package conformance_test

import (
	"os"
	"strings"
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

// TestFromOpenAPIServerVariableWithoutDefault: a path item's server whose
// variable has no default (the document breaks the spec, as hand-written
// ones do) makes that path's operations unusable, naming the variable,
// instead of failing the whole document (the other paths, on the
// document's server, are still checked) or sending "%7Bbase%7D" in the
// URL; a variable with an enum and no default takes its first value.
func TestFromOpenAPIServerVariableWithoutDefault(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
		"paths": {
			"/a": {"servers": [{"url": "https://{region}.example.com"}],
				"post": {"operationId": "a", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}},
			"/b": {"servers": [{"url": "https://api.example.com/{base}", "variables": {"base": {"description": "no default"}}}],
				"post": {"operationId": "b", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}},
			"/c": {"post": {"operationId": "c", "parameters": [{"name": "Idempotency-Key", "in": "header"}],
				"servers": [{"url": "https://{region}.example.com", "variables": {"region": {"enum": ["eu", "us"]}}}]}},
			"/d": {"post": {"operationId": "d", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 4 {
		t.Fatalf("FromOpenAPI: %v, %d operations; want the 4, those on a server with a variable without default unusable", err, len(ops))
	}
	for _, o := range ops[:2] {
		if !strings.Contains(o.Unusable, "server URL") || !strings.Contains(o.Unusable, "no default") {
			t.Errorf("%s: URL %s, Unusable %q; want it unusable for its server's variable without default", o.Target.Name, o.Target.URL, o.Unusable)
		}
	}
	if got, want := ops[2].Target.URL, "https://eu.example.com/c"; got != want || ops[2].Unusable != "" {
		t.Errorf("c: URL %s, Unusable %q; want %s, usable (the enum's first value)", got, ops[2].Unusable, want)
	}
	if got, want := ops[3].Target.URL, "http://127.0.0.1:9/d"; got != want || ops[3].Unusable != "" {
		t.Errorf("d: URL %s, Unusable %q; want %s, usable", got, ops[3].Unusable, want)
	}
}

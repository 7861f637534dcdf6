package conformance_test

import (
	"strings"
	"testing"

	"github.com/saferetry/saferetry/conformance"
)

// TestFromOpenAPIAdditionalOperationEmptyName: an additionalOperations
// entry named "" is one operation with an empty method name, unusable
// for that, named `"" /path` (or by its operationId), whether its
// operation resolves or not: it was named like a path item standing for
// its path's operations (" /links", "/other"), and its reason called ""
// a method that is no token.
func TestFromOpenAPIAdditionalOperationEmptyName(t *testing.T) {
	key := `"parameters": [{"name": "Idempotency-Key", "in": "header"}]`
	doc := []byte(`{"openapi": "3.2.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://h"}], "paths": {
		"/links": {"additionalOperations": {"": {` + key + `}}},
		"/named": {"additionalOperations": {"": {"operationId": "unnamedMethod", ` + key + `}}},
		"/other": {"additionalOperations": {"": {"$ref": "#/components/pathItems/nowhere"}}}}}`)
	ops, err := conformance.FromOpenAPI(doc, "", "")
	if err != nil || len(ops) != 3 {
		t.Fatalf("FromOpenAPI: %v, %+v; want 3 operations", err, ops)
	}
	want := map[string]string{"/links": `"" /links`, "/named": "unnamedMethod", "/other": `"" /other`}
	for _, o := range ops {
		if o.Target.Method != "" || o.Target.Name != want[o.Path] {
			t.Errorf("%s: method %q, name %q; want no method, named %q", o.Path, o.Target.Method, o.Target.Name, want[o.Path])
		}
		saysAll(t, o.Path+": Unusable", o.Unusable, []string{`additionalOperations entry ""`, "empty method name"})
		if strings.Contains(o.Unusable, "$ref") {
			t.Errorf("%s: Unusable %q; want the empty name, which no $ref mends", o.Path, o.Unusable)
		}
	}
}

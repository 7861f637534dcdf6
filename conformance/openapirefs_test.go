package conformance_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/conformance"
)

// refDoc is a document whose path /p is pathItem, with components that
// hold a cycle of parameters (A, B) and of path items (X, Y).
func refDoc(pathItem string) []byte { return refDocAt("/p", pathItem) }

// refDocAt is refDoc with path for /p.
func refDocAt(path, pathItem string) []byte {
	return []byte(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
		"components": {
			"parameters": {
				"Key": {"name": "Idempotency-Key", "in": "header", "required": true},
				"A": {"$ref": "#/components/parameters/B"}, "B": {"$ref": "#/components/parameters/A"}
			},
			"pathItems": {"X": {"$ref": "#/components/pathItems/Y"}, "Y": {"$ref": "#/components/pathItems/X"}}
		},
		"paths": {"` + path + `": ` + pathItem + `}}`)
}

// saysAll reports each of wants that got, what label names, does not say.
func saysAll(t *testing.T, label, got string, wants []string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("%s %q does not say %s", label, got, want)
		}
	}
}

// TestFromOpenAPIBrokenRefs: a $ref that does not resolve (no such
// target, another document's, a cycle) is told, naming the ref and where
// it was found, not taken for "absent". A parameter's or a request
// body's makes its operation unusable, saying why: the operation whose Idempotency-Key
// parameter was such a ref was dropped as one that takes no key, one
// whose other required parameter was was checked without it, and one
// whose request body was was sent without a body.
func TestFromOpenAPIBrokenRefs(t *testing.T) {
	for _, tc := range []struct {
		name, pathItem string
		unusable       []string // the one operation's Unusable says each
	}{
		{"the key parameter", `{"post": {"operationId": "pay", "parameters": [{"$ref": "#/components/parameters/Kay"}]}}`,
			[]string{"parameter 1", `"#/components/parameters/Kay"`, `no member "Kay"`}},
		{"the key parameter, external", `{"post": {"operationId": "pay", "parameters": [{"$ref": "common.json#/Key"}]}}`,
			[]string{"parameter 1", `"common.json#/Key"`, "external"}},
		{"another parameter", `{"post": {"operationId": "pay", "parameters": [{"$ref": "#/components/parameters/Key"},
			{"$ref": "#/components/parameters/A"}]}}`,
			[]string{"parameter 2", `"#/components/parameters/A"`, "cycle"}},
		{"the path item's parameter", `{"parameters": [{"$ref": "#/components/parameters/Nope"}],
			"post": {"operationId": "pay", "parameters": [{"$ref": "#/components/parameters/Key"}]}}`,
			[]string{"path item's parameter 1", `"#/components/parameters/Nope"`}},
		{"request body", `{"post": {"operationId": "pay", "parameters": [{"$ref": "#/components/parameters/Key"}],
			"requestBody": {"$ref": "#/components/requestBodies/Nope"}}}`,
			[]string{"request body", `"#/components/requestBodies/Nope"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := conformance.FromOpenAPI(refDoc(tc.pathItem), "", "")
			if err != nil || len(ops) != 1 {
				t.Fatalf("FromOpenAPI: %v, %d operations %+v; want the one, unusable", err, len(ops), ops)
			}
			if ops[0].Unusable == "" || ops[0].NeedsBody || ops[0].NeedsHeaders != nil {
				t.Errorf("pay: Unusable %q, NeedsBody %v, NeedsHeaders %v; want unusable for a broken $ref, not for what a flag gives",
					ops[0].Unusable, ops[0].NeedsBody, ops[0].NeedsHeaders)
			}
			saysAll(t, "pay: Unusable", ops[0].Unusable, tc.unusable)
		})
	}
}

// TestFromOpenAPIBrokenPathItemRefs: a path item's $ref that does not
// resolve (to another file of a split document, to nothing, into a
// cycle), or an operation's, makes only the operations behind it
// unusable, naming the ref: it failed the whole document, so that no
// other operation was checked. A path item's stands for its operations,
// which of them take the key unknown: one Operation named by its path,
// without a method.
func TestFromOpenAPIBrokenPathItemRefs(t *testing.T) {
	const other = `"/q": {"post": {"operationId": "pay", "parameters": [{"$ref": "#/components/parameters/Key"}]}}`
	for _, tc := range []struct {
		name, pathItem string
		method, target string   // the unusable operation's
		unusable       []string // its Unusable says each
	}{
		{"path item, external", `{"$ref": "./paths/payments.yaml"}`, "", "/p",
			[]string{"its path item", `"./paths/payments.yaml"`, "external"}},
		{"path item, no target", `{"$ref": "#/components/pathItems/Nope"}`, "", "/p",
			[]string{"its path item", `"#/components/pathItems/Nope"`, `no member "Nope"`}},
		{"path item, cycle", `{"$ref": "#/components/pathItems/X"}`, "", "/p",
			[]string{"its path item", `"#/components/pathItems/X"`, "cycle"}},
		{"operation", `{"post": {"$ref": "#/components/operations/Nope"}}`, "POST", "POST /p",
			[]string{"its $ref", `"#/components/operations/Nope"`, `no member "operations"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := conformance.FromOpenAPI(refDoc(tc.pathItem+`, `+other), "", "")
			if err != nil || len(ops) != 2 {
				t.Fatalf("FromOpenAPI: %v, %d operations %+v; want the one behind the $ref, unusable, and pay", err, len(ops), ops)
			}
			o := ops[0]
			if o.Path != "/p" || o.Target.Method != tc.method || o.Target.Name != tc.target || o.Unusable == "" || o.NeedsBody || o.NeedsHeaders != nil {
				t.Errorf("first operation: %s %s named %q, Unusable %q, NeedsBody %v, NeedsHeaders %v; want %q /p named %q, unusable for its $ref",
					o.Target.Method, o.Path, o.Target.Name, o.Unusable, o.NeedsBody, o.NeedsHeaders, tc.method, tc.target)
			}
			saysAll(t, "Unusable", o.Unusable, tc.unusable)
			if p := ops[1]; p.Target.Name != "pay" || p.Unusable != "" || p.Target.URL != "http://127.0.0.1:9/q" {
				t.Errorf("pay: unusable %q, URL %s; want it usable at http://127.0.0.1:9/q", p.Unusable, p.Target.URL)
			}
		})
	}
}

// TestFromOpenAPIBrokenExampleRefs: a $ref that does not resolve on the
// way to a value the operation sends (a parameter's schema or examples
// entry, the request body's example) makes the operation unusable,
// naming the ref and the parameter: it read as "has no example", or for a
// header or the body as what a flag may give, which hid the ref. One the
// operation does not read (an examples entry after one with a value, an
// optional parameter) is no reason.
func TestFromOpenAPIBrokenExampleRefs(t *testing.T) {
	key := `{"$ref": "#/components/parameters/Key"}`
	id := `{"name": "id", "in": "path", "required": true, "example": "1"}`
	for _, tc := range []struct {
		name, pathItem string
		unusable       []string // nil for a usable operation
	}{
		{"path parameter's schema", `{"post": {"operationId": "pay", "parameters": [` + key + `,
			{"name": "id", "in": "path", "required": true, "schema": {"$ref": "#/components/schemas/Nope"}}]}}`,
			[]string{"path parameter id", `"#/components/schemas/Nope"`}},
		{"required query parameter's examples entry", `{"post": {"operationId": "pay", "parameters": [` + key + `, ` + id + `,
			{"name": "q", "in": "query", "required": true, "examples": {"a": {"$ref": "#/components/examples/Nope"}}}]}}`,
			[]string{"query parameter q", `"#/components/examples/Nope"`}},
		{"required header's schema", `{"post": {"operationId": "pay", "parameters": [` + key + `, ` + id + `,
			{"name": "X-Tenant", "in": "header", "required": true, "schema": {"$ref": "common.json#/Tenant"}}]}}`,
			[]string{"header X-Tenant", `"common.json#/Tenant"`, "external"}},
		{"request body's example", `{"post": {"operationId": "pay", "parameters": [` + key + `, ` + id + `],
			"requestBody": {"required": true, "content": {"application/json": {"examples": {"a": {"$ref": "#/components/examples/Nope"}}}}}}}`,
			[]string{"request body", `"#/components/examples/Nope"`}},
		{"an examples entry after the one taken", `{"post": {"operationId": "pay", "parameters": [` + key + `, ` + id + `],
			"requestBody": {"content": {"application/json": {"examples": {"a": {"value": {"n": 1}}, "b": {"$ref": "#/nope"}}}}}}}`,
			nil},
		{"an optional parameter", `{"post": {"operationId": "pay", "parameters": [` + key + `, ` + id + `,
			{"name": "q", "in": "query", "schema": {"$ref": "#/components/schemas/Nope"}}]}}`,
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := conformance.FromOpenAPI(refDocAt("/p/{id}", tc.pathItem), "", "")
			if err != nil || len(ops) != 1 {
				t.Fatalf("FromOpenAPI: %v, %d operations %+v; want the one", err, len(ops), ops)
			}
			o := ops[0]
			if tc.unusable == nil {
				if o.Unusable != "" {
					t.Errorf("pay: Unusable %q; want it usable", o.Unusable)
				}
				return
			}
			if o.Unusable == "" || o.NeedsBody || o.NeedsHeaders != nil {
				t.Errorf("pay: Unusable %q, NeedsBody %v, NeedsHeaders %v; want unusable for a broken $ref, not for what a flag gives",
					o.Unusable, o.NeedsBody, o.NeedsHeaders)
			}
			saysAll(t, "pay: Unusable", o.Unusable, tc.unusable)
		})
	}
}

// TestFromOpenAPIRefNotAString: a $ref that is no string is one that does
// not resolve: the parameter holding it was read as a parameter without
// a name, and the operation whose key it was dropped as one without.
func TestFromOpenAPIRefNotAString(t *testing.T) {
	ops, err := conformance.FromOpenAPI(refDoc(`{"post": {"operationId": "pay", "parameters": [{"$ref": 5}]}}`), "", "")
	if err != nil || len(ops) != 1 || !strings.Contains(ops[0].Unusable, "parameter 1") ||
		!strings.Contains(ops[0].Unusable, "$ref") || !strings.Contains(ops[0].Unusable, "not a string") {
		t.Fatalf("FromOpenAPI: %v, %d operations %+v; want pay, unusable for its parameter 1's $ref that is not a string", err, len(ops), ops)
	}
}

// TestFromOpenAPIRefSiblingExample: a schema whose $ref has an example
// (or a default) beside it, as OpenAPI 3.1 writes a schema, is filled
// with it: the sibling was dropped for the target's, so the operation
// lacked a body or a path parameter, or was unusable when the $ref did
// not resolve though the value was right there.
func TestFromOpenAPIRefSiblingExample(t *testing.T) {
	doc := []byte(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://h"}],
		"components": {"schemas": {"Payment": {"type": "object"}, "Id": {"type": "string"}}},
		"paths": {
			"/a/{id}": {"post": {"operationId": "a",
				"parameters": [{"name": "Idempotency-Key", "in": "header"},
					{"name": "id", "in": "path", "required": true, "schema": {"$ref": "#/components/schemas/Id", "default": "p1"}}],
				"requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Payment", "example": {"amount": 1}}}}}}},
			"/b": {"post": {"operationId": "b",
				"parameters": [{"name": "Idempotency-Key", "in": "header"}],
				"requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Gone", "examples": [{"amount": 2}]}}}}}}}}`)
	ops, err := conformance.FromOpenAPI(doc, "", "")
	if err != nil || len(ops) != 2 {
		t.Fatalf("FromOpenAPI: %v, %+v; want a and b", err, ops)
	}
	if a := ops[0]; a.Unusable != "" || a.Target.URL != "http://h/a/p1" || string(a.Target.Body) != `{"amount":1}` {
		t.Errorf("a: unusable %q, URL %s, body %s; want http://h/a/p1 with {\"amount\":1}", a.Unusable, a.Target.URL, a.Target.Body)
	}
	if b := ops[1]; b.Unusable != "" || string(b.Target.Body) != `{"amount":2}` {
		t.Errorf("b: unusable %q, body %s; want {\"amount\":2}", b.Unusable, b.Target.Body)
	}
}

// TestFromOpenAPIPathItemRefSiblings: a path item whose $ref has
// members beside it (an operation, parameters), as OpenAPI 3.0 allows,
// is read with them, over its target's: an operation beside the $ref,
// taking the key, was dropped silently.
func TestFromOpenAPIPathItemRefSiblings(t *testing.T) {
	doc := []byte(`{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://h"}],
		"components": {"x-items": {"Read": {"get": {"operationId": "read"}, "parameters": [{"name": "Idempotency-Key", "in": "header"}]}}},
		"paths": {"/p": {"$ref": "#/components/x-items/Read", "post": {"operationId": "pay"}}}}`)
	ops, err := conformance.FromOpenAPI(doc, "", "")
	if err != nil || len(ops) != 2 || ops[0].Target.Name != "read" || ops[1].Target.Name != "pay" {
		t.Fatalf("FromOpenAPI: %v, %+v; want read and pay, which its path item's parameters give the key", err, ops)
	}
}

// TestFromOpenAPILongRefChains: a legal chain of $refs is followed
// however long (a generated document aliases parameters through many
// components): one of 40 was refused as "a chain of more than 16". A
// cycle, however long, is still refused, saying so and naming the ref
// written at the operation.
func TestFromOpenAPILongRefChains(t *testing.T) {
	chain := func(n int, last string) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `"P%d": {"$ref": "#/components/parameters/P%d"}, `, i, i+1)
		}
		fmt.Fprintf(&b, `"P%d": %s`, n, last)
		return b.String()
	}
	doc := func(params string) []byte {
		return []byte(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://h"}],
			"components": {"parameters": {` + params + `}},
			"paths": {"/p": {"post": {"operationId": "pay", "parameters": [{"$ref": "#/components/parameters/P0"}]}}}}`)
	}
	ops, err := conformance.FromOpenAPI(doc(chain(40, `{"name": "Idempotency-Key", "in": "header", "required": true}`)), "", "")
	if err != nil || len(ops) != 1 || ops[0].Unusable != "" || !ops[0].Target.KeyRequired {
		t.Errorf("a chain of 40 $refs: %v, %+v; want pay, usable, its key required", err, ops)
	}
	ops, err = conformance.FromOpenAPI(doc(chain(40, `{"$ref": "#/components/parameters/P3"}`)), "", "")
	if err != nil || len(ops) != 1 {
		t.Fatalf("a cycle of 38 $refs: %v, %+v; want pay, unusable", err, ops)
	}
	saysAll(t, "a cycle: Unusable", ops[0].Unusable, []string{"parameter 1", `"#/components/parameters/P0"`, "a cycle of $refs"})
}

// TestFromOpenAPIOptionalBodyBrokenRef: an optional request body whose
// example is behind a $ref that does not resolve (its schema's, an
// examples entry's) leaves the operation usable, sent without a body, as
// one without an example is: the operation was unusable for a body it
// does not need. A required one still makes it unusable, naming the ref.
func TestFromOpenAPIOptionalBodyBrokenRef(t *testing.T) {
	key := `{"$ref": "#/components/parameters/Key"}`
	for _, tc := range []struct {
		name, media string
		required    bool
	}{
		{"schema", `{"schema": {"$ref": "#/components/schemas/Nope"}}`, false},
		{"examples entry", `{"examples": {"a": {"$ref": "./examples/pay.json"}}}`, false},
		{"schema, required", `{"schema": {"$ref": "#/components/schemas/Nope"}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := conformance.FromOpenAPI(refDoc(fmt.Sprintf(`{"post": {"operationId": "pay", "parameters": [%s],
				"requestBody": {"required": %v, "content": {"application/json": %s}}}}`, key, tc.required, tc.media)), "", "")
			if err != nil || len(ops) != 1 {
				t.Fatalf("FromOpenAPI: %v, %+v; want pay", err, ops)
			}
			o := ops[0]
			if tc.required {
				saysAll(t, "pay: Unusable", o.Unusable, []string{"request body", `"#/components/schemas/Nope"`})
				return
			}
			if o.Unusable != "" || o.Target.Body != nil || o.Target.Header.Get("Content-Type") != "" {
				t.Errorf("pay: Unusable %q, body %q, Content-Type %q; want it usable, sent without a body",
					o.Unusable, o.Target.Body, o.Target.Header.Get("Content-Type"))
			}
		})
	}
}

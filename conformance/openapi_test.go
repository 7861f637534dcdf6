package conformance_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/conformance"
)

// openAPIDoc declares the key on POST /payments through a $ref to
// components, not on GET /payments, on the operations of /payments/{id} at
// path level (lower case, with an example for the id), on POST
// /refunds/{id} without an example for the id, and on POST /other as a
// query parameter, which is not the header.
const openAPIDoc = `{
  "openapi": "3.1.0",
  "info": {"title": "t", "version": "1"},
  "servers": [{"url": "{scheme}://api.example.com/v1", "variables": {"scheme": {"default": "https"}}}],
  "components": {
    "parameters": {
      "Key": {"name": "Idempotency-Key", "in": "header", "required": true, "schema": {"type": "string"}},
      "Alias": {"$ref": "#/components/parameters/Key"}
    },
    "requestBodies": {
      "Payment": {"required": true, "content": {"application/json": {
        "schema": {"type": "object"},
        "examples": {"b": {"value": {"amount": 2}}, "a": {"$ref": "#/components/examples/Pay"}}
      }}}
    },
    "examples": {"Pay": {"value": {"amount": 1250, "currency": "EUR"}}}
  },
  "paths": {
    "/payments": {
      "get": {"operationId": "listPayments"},
      "post": {
        "operationId": "createPayment",
        "parameters": [{"$ref": "#/components/parameters/Alias"}],
        "requestBody": {"$ref": "#/components/requestBodies/Payment"}
      }
    },
    "/payments/{id}": {
      "parameters": [
        {"name": "idempotency-key", "in": "header", "schema": {"type": "string"}},
        {"name": "id", "in": "path", "required": true, "schema": {"type": "string", "example": "pay 1"}}
      ],
      "get": {"operationId": "getPayment"},
      "patch": {
        "requestBody": {"content": {"application/merge-patch+json": {"example": {"note": "x"}}}}
      }
    },
    "/refunds/{id}": {
      "post": {"parameters": [
        {"name": "Idempotency-Key", "in": "header", "required": false},
        {"name": "id", "in": "path", "required": true}
      ]}
    },
    "/other": {"post": {"parameters": [{"name": "Idempotency-Key", "in": "query"}]}}
  }
}`

func TestFromOpenAPI(t *testing.T) {
	ops, err := conformance.FromOpenAPI([]byte(openAPIDoc), "", "")
	if err != nil {
		t.Fatal(err)
	}
	type op struct {
		name, method, url, body, contentType string
		required                             bool
		unusable                             string
	}
	var got []op
	for _, o := range ops {
		got = append(got, op{o.Target.Name, o.Target.Method, o.Target.URL, string(o.Target.Body),
			o.Target.Header.Get("Content-Type"), o.Target.KeyRequired, o.Unusable})
	}
	want := []op{
		{"createPayment", "POST", "https://api.example.com/v1/payments", `{"amount":1250,"currency":"EUR"}`, "application/json", true, ""},
		{"getPayment", "GET", "https://api.example.com/v1/payments/pay%201", "", "", false, ""},
		{"PATCH /payments/{id}", "PATCH", "https://api.example.com/v1/payments/pay%201", `{"note":"x"}`, "application/merge-patch+json", false, ""},
		{"POST /refunds/{id}", "POST", "https://api.example.com/v1/refunds/{id}", "", "", false, "path parameter id has no example"},
	}
	if len(got) != len(want) {
		t.Fatalf("operations:\n%+v\nwant\n%+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("operation %d:\n%+v\nwant\n%+v", i, got[i], want[i])
		}
	}
}

func TestFromOpenAPIServer(t *testing.T) {
	doc := func(servers string) []byte {
		return []byte(`{"openapi": "3.0.3", ` + servers + ` "paths": {"/p": {"post": {"parameters": [
			{"name": "Idempotency-Key", "in": "header"}]}}}}`)
	}
	for _, tc := range []struct {
		name, servers, docURL, base, want, err string
	}{
		{"base wins", `"servers": [{"url": "https://a.example"}],`, "", "http://127.0.0.1:9/", "http://127.0.0.1:9/p", ""},
		{"no servers, from the document's URL", ``, "http://127.0.0.1:9/openapi.json", "", "http://127.0.0.1:9/p", ""},
		{"relative server", `"servers": [{"url": "/api"}],`, "http://h.example/spec/openapi.json", "", "http://h.example/api/p", ""},
		{"relative server, no document URL", `"servers": [{"url": "/api"}],`, "", "", "", "is relative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := conformance.FromOpenAPI(doc(tc.servers), tc.docURL, tc.base)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != 1 || ops[0].Target.URL != tc.want || ops[0].Target.Method != http.MethodPost {
				t.Fatalf("operations %+v, want POST %s", ops, tc.want)
			}
		})
	}
	for _, bad := range []string{`not json`, `{"swagger": "2.0"}`} {
		if _, err := conformance.FromOpenAPI([]byte(bad), "", "http://h"); err == nil {
			t.Errorf("FromOpenAPI(%s): no error", bad)
		}
	}
}

// TestFromOpenAPINeedsBody: NeedsBody is set only when a required request
// body without an example is all an operation lacks, not when a path
// parameter has no example either.
func TestFromOpenAPINeedsBody(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}], "paths": {
		"/accounts/{account}/payments": {"post": {"operationId": "pathAndBody",
			"parameters": [{"name": "account", "in": "path", "required": true}, {"name": "Idempotency-Key", "in": "header"}],
			"requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}}}}},
		"/payments": {"post": {"operationId": "bodyOnly",
			"parameters": [{"name": "Idempotency-Key", "in": "header"}],
			"requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}}}}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 2 {
		t.Fatalf("FromOpenAPI: %v, %d operations", err, len(ops))
	}
	for _, o := range ops {
		switch o.Target.Name {
		case "pathAndBody":
			if o.NeedsBody || !strings.Contains(o.Unusable, "path parameter account") {
				t.Errorf("%s: NeedsBody %v, Unusable %q; want false and the path parameter", o.Target.Name, o.NeedsBody, o.Unusable)
			}
		case "bodyOnly":
			if !o.NeedsBody || !strings.Contains(o.Unusable, "request body") {
				t.Errorf("%s: NeedsBody %v, Unusable %q; want true and the request body", o.Target.Name, o.NeedsBody, o.Unusable)
			}
		}
	}
}

// TestFromOpenAPIKeepsNumbers: an integer above 2^53 in an example (an
// account number, an amount in minor units) is sent as the document
// writes it, in the body and in the path, not rounded through a float64.
func TestFromOpenAPIKeepsNumbers(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
		"paths": {"/accounts/{account}/transfers": {"post": {"operationId": "transfer",
			"parameters": [{"name": "Idempotency-Key", "in": "header"},
				{"name": "account", "in": "path", "required": true, "example": 9007199254740993}],
			"requestBody": {"content": {"application/json": {"example": {"account": 9007199254740993, "amount": 1.50}}}}}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 1 {
		t.Fatalf("FromOpenAPI: %v, %d operations", err, len(ops))
	}
	if got, want := string(ops[0].Target.Body), `{"account":9007199254740993,"amount":1.50}`; got != want {
		t.Errorf("the example's body is %s, want %s", got, want)
	}
	if got, want := ops[0].Target.URL, "http://127.0.0.1:9/accounts/9007199254740993/transfers"; got != want {
		t.Errorf("URL %s, want %s", got, want)
	}
}

// A server variable that is not an object is a malformed document, not a
// panic: it is left as written, and the variables that are objects are
// filled in.
func TestFromOpenAPIOddServerVariables(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
		"servers": [{"url": "http://{host}:{port}", "variables": {"host": "oops", "port": {"default": "9"}}}],
		"paths": {"/payments": {"post": {"operationId": "pay",
			"parameters": [{"name": "Idempotency-Key", "in": "header"}],
			"requestBody": {"content": {"application/json": {"example": {"amount": 1}}}}}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "http://127.0.0.1:9")
	if err != nil || len(ops) != 1 {
		t.Fatalf("FromOpenAPI with a base URL: %v, %d operations", err, len(ops))
	}
	if _, err := conformance.FromOpenAPI([]byte(doc), "", ""); err == nil {
		t.Errorf("FromOpenAPI took %q for a server URL", "http://{host}:9")
	}
}

// TestFromOpenAPINeedsBodyKeepsItsMediaType: an operation whose required
// body has no example carries the media type its document declares in
// Content-Type, so that a body the caller gives (-body) goes out as that
// type: a form body was sent without one, and a JSON-looking one as
// application/json to an endpoint that takes neither. A JSON type is
// preferred among several, and a wildcard or a multipart type (which
// needs its body's boundary) is never sent.
func TestFromOpenAPINeedsBodyKeepsItsMediaType(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}], "paths": {
		"/form": {"post": {"operationId": "form",
			"parameters": [{"name": "Idempotency-Key", "in": "header"}],
			"requestBody": {"required": true, "content": {"application/x-www-form-urlencoded": {"schema": {"type": "object"}}}}}},
		"/either": {"post": {"operationId": "either",
			"parameters": [{"name": "Idempotency-Key", "in": "header"}],
			"requestBody": {"required": true, "content": {"application/xml": {}, "application/merge-patch+json": {}}}}},
		"/any": {"post": {"operationId": "any",
			"parameters": [{"name": "Idempotency-Key", "in": "header"}],
			"requestBody": {"required": true, "content": {"*/*": {}}}}},
		"/upload": {"post": {"operationId": "upload",
			"parameters": [{"name": "Idempotency-Key", "in": "header"}],
			"requestBody": {"required": true, "content": {"multipart/form-data": {}}}}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 4 {
		t.Fatalf("FromOpenAPI: %v, %d operations", err, len(ops))
	}
	want := map[string]string{
		"form":   "application/x-www-form-urlencoded",
		"either": "application/merge-patch+json",
		"any":    "",
		"upload": "",
	}
	for _, o := range ops {
		if !o.NeedsBody {
			t.Errorf("%s: NeedsBody false; want true", o.Target.Name)
		}
		if got := o.Target.Header.Get("Content-Type"); got != want[o.Target.Name] {
			t.Errorf("%s: Content-Type %q; want %q", o.Target.Name, got, want[o.Target.Name])
		}
	}
}

// TestFromOpenAPIMethods32: OpenAPI 3.2's query operation, and the
// operations of its additionalOperations (methods without a field of
// their own, written as sent), are read like the others, after them, in
// method order: they were passed over. An additionalOperations entry for
// a method that has its own field, which 3.2 does not allow, is unusable,
// saying so; additionalOperations that is no object fails the document,
// as a path item that is no object does.
func TestFromOpenAPIMethods32(t *testing.T) {
	key := `"parameters": [{"name": "Idempotency-Key", "in": "header"}]`
	doc := []byte(`{"openapi": "3.2.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://h"}], "paths": {
		"/search": {"query": {"operationId": "search", ` + key + `}},
		"/links": {"post": {"operationId": "create", ` + key + `},
			"additionalOperations": {"UNLINK": {` + key + `}, "LINK": {"operationId": "link", ` + key + `},
				"PURGE": {"operationId": "purge"}, "Post": {"operationId": "again", ` + key + `}}}}}`)
	ops, err := conformance.FromOpenAPI(doc, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range ops {
		got = append(got, o.Target.Method+" "+o.Target.URL+" "+o.Target.Name)
	}
	want := []string{"POST http://h/links create", "LINK http://h/links link", "Post http://h/links again", "UNLINK http://h/links UNLINK /links",
		"QUERY http://h/search search"}
	if !slices.Equal(got, want) {
		t.Fatalf("operations\n%q\nwant\n%q", got, want)
	}
	for _, o := range ops {
		if o.Target.Name == "again" {
			saysAll(t, "again: Unusable", o.Unusable, []string{`additionalOperations entry "Post"`, "post"})
		} else if o.Unusable != "" {
			t.Errorf("%s: Unusable %q; want it usable", o.Target.Name, o.Unusable)
		}
	}

	_, err = conformance.FromOpenAPI([]byte(`{"openapi": "3.2.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://h"}],
		"paths": {"/links": {"additionalOperations": [{"LINK": {}}]}}}`), "", "")
	if err == nil {
		t.Fatal("additionalOperations a list: no error")
	}
	saysAll(t, "error", err.Error(), []string{"/links", "additionalOperations", "not an object"})
}

// TestFromOpenAPIAdditionalOperationNotAMethod: an additionalOperations
// entry whose name is no HTTP method (an RFC 9110 token: "BAD METHOD",
// "") is unusable, naming it: it was returned usable, so -dry-run
// stopped at it, refusing every operation, and one named "" was sent as
// a POST.
func TestFromOpenAPIAdditionalOperationNotAMethod(t *testing.T) {
	key := `"parameters": [{"name": "Idempotency-Key", "in": "header"}]`
	doc := []byte(`{"openapi": "3.2.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://h"}], "paths": {
		"/links": {"additionalOperations": {"BAD METHOD": {` + key + `}, "": {` + key + `}, "LINK": {` + key + `}}}}}`)
	ops, err := conformance.FromOpenAPI(doc, "", "")
	if err != nil || len(ops) != 3 {
		t.Fatalf("FromOpenAPI: %v, %+v", err, ops)
	}
	for _, o := range ops {
		switch o.Target.Method {
		case "LINK":
			if o.Unusable != "" {
				t.Errorf("LINK: Unusable %q; want it usable", o.Unusable)
			}
		default:
			saysAll(t, fmt.Sprintf("%q: Unusable", o.Target.Method), o.Unusable,
				[]string{fmt.Sprintf("additionalOperations entry %q", o.Target.Method), "not an HTTP method"})
		}
	}
}

// TestFromOpenAPIAdditionalOperationNull: an additionalOperations entry
// that is null is no operation, as a method member that is null is
// none: it failed the whole document ("LINK /links: not an object").
func TestFromOpenAPIAdditionalOperationNull(t *testing.T) {
	key := `"parameters": [{"name": "Idempotency-Key", "in": "header"}]`
	doc := []byte(`{"openapi": "3.2.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://h"}], "paths": {
		"/links": {"post": null, "additionalOperations": {"LINK": null, "UNLINK": {` + key + `}}}}}`)
	ops, err := conformance.FromOpenAPI(doc, "", "")
	if err != nil || len(ops) != 1 || ops[0].Target.Method != "UNLINK" {
		t.Fatalf("FromOpenAPI: %v, %+v; want UNLINK only", err, ops)
	}
}

package conformance_test

import (
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/conformance"
)

// TestFromOpenAPIRequiredParameters: the required query and header
// parameters other than the key, as an ASP.NET API with versioning
// declares them (api-version in the query, a version header), are sent
// with their example (or their schema's default); without one the
// operation is unusable and says which parameter, rather than being
// checked with requests the API refuses with 400 and reported as failing
// its MUSTs. An optional parameter is not sent, and neither is a header
// OpenAPI says to ignore (Authorization, Content-Type, Accept).
func TestFromOpenAPIRequiredParameters(t *testing.T) {
	doc, err := os.ReadFile("testdata/openapi/swashbuckle-versioned.json")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := conformance.FromOpenAPI(doc, "", "")
	if err != nil || len(ops) != 3 {
		t.Fatalf("FromOpenAPI: %v, %d operations", err, len(ops))
	}
	byName := map[string]conformance.Operation{}
	for _, o := range ops {
		byName[o.Target.Name] = o
	}

	pay := byName["POST /payments"]
	if pay.Unusable != "" {
		t.Errorf("POST /payments unusable: %s", pay.Unusable)
	}
	if got, want := pay.Target.URL, "http://127.0.0.1:9/payments?api-version=1.0"; got != want {
		t.Errorf("POST /payments URL %s, want %s (the required api-version, not the optional include)", got, want)
	}
	if got := pay.Target.Header.Get("X-Api-Version"); got != "2024-06-01" {
		t.Errorf("POST /payments X-Api-Version %q, want the example 2024-06-01; header %v", got, pay.Target.Header)
	}
	if _, ok := pay.Target.Header[http.CanonicalHeaderKey("Authorization")]; ok {
		t.Errorf("POST /payments sends Authorization from a parameter OpenAPI says to ignore: %v", pay.Target.Header)
	}

	capture := byName["capture"]
	if !strings.Contains(capture.Unusable, "query parameter tenant") {
		t.Errorf("capture: Unusable %q; want it to name the required query parameter tenant", capture.Unusable)
	}

	refund := byName["refund"]
	if !strings.Contains(refund.Unusable, "header Tenant-Id") {
		t.Errorf("refund: Unusable %q; want it to name the required header Tenant-Id", refund.Unusable)
	}
}

// TestFromOpenAPIPathParameterDefault: a path parameter without an
// example is filled with its schema's default, or its enum's first value
// (FastAPI writes an Enum path parameter as a $ref to a schema with an
// enum), before the operation is given up as unusable.
func TestFromOpenAPIPathParameterDefault(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
		"components": {"schemas": {"Region": {"type": "string", "enum": ["eu", "us"], "title": "Region"}}},
		"paths": {"/{region}/accounts/{account}/payments": {"post": {"operationId": "pay",
			"parameters": [{"name": "Idempotency-Key", "in": "header"},
				{"name": "region", "in": "path", "required": true, "schema": {"$ref": "#/components/schemas/Region"}},
				{"name": "account", "in": "path", "required": true, "schema": {"type": "integer", "default": 7}}]}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 1 {
		t.Fatalf("FromOpenAPI: %v, %d operations", err, len(ops))
	}
	if got, want := ops[0].Target.URL, "http://127.0.0.1:9/eu/accounts/7/payments"; got != want || ops[0].Unusable != "" {
		t.Errorf("URL %s, Unusable %q; want %s, usable", got, ops[0].Unusable, want)
	}
}

// TestFromOpenAPIQueryArrayStyles: a required query array is sent as its
// parameter's style and explode say: exploded (ids=a&ids=b) by default,
// one comma-separated value with explode false (as openapi-generator and
// Swashbuckle write a CSV list), space- or pipe-separated for those
// styles; sent exploded, the API reads one value, or the list "a" alone.
func TestFromOpenAPIQueryArrayStyles(t *testing.T) {
	for _, tc := range []struct{ param, want string }{
		{`"example": ["a b", "c,d"]`, "ids=a+b&ids=c%2Cd"},
		{`"explode": true, "example": ["a", "b"]`, "ids=a&ids=b"},
		{`"explode": false, "example": ["a b", "c,d"]`, "ids=a+b,c%2Cd"},
		{`"style": "form", "explode": false, "schema": {"type": "array", "default": [1, 2]}`, "ids=1,2"},
		{`"style": "spaceDelimited", "explode": false, "example": ["a", "b"]`, "ids=a%20b"},
		{`"style": "pipeDelimited", "explode": false, "example": ["a", "b|c"]`, "ids=a%7Cb%7Cc"},
	} {
		doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
			"paths": {"/p": {"post": {"operationId": "pay", "parameters": [{"name": "Idempotency-Key", "in": "header"},
				{"name": "ids", "in": "query", "required": true, ` + tc.param + `}]}}}}`
		ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
		if err != nil || len(ops) != 1 {
			t.Fatalf("%s: FromOpenAPI: %v, %d operations", tc.param, err, len(ops))
		}
		if got, want := ops[0].Target.URL, "http://127.0.0.1:9/p?"+tc.want; got != want || ops[0].Unusable != "" {
			t.Errorf("%s: URL %s, Unusable %q; want %s", tc.param, got, ops[0].Unusable, want)
		}
	}
}

// TestFromOpenAPIExampleAfterExternalValue: an examples entry with only an
// externalValue (a document the checker does not read) is passed over for
// the next entry that has a value, rather than taking the parameter for
// one without an example.
func TestFromOpenAPIExampleAfterExternalValue(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
		"paths": {"/p": {"post": {"operationId": "pay", "parameters": [{"name": "Idempotency-Key", "in": "header"},
			{"name": "Tenant-Id", "in": "header", "required": true, "schema": {"type": "string"},
				"examples": {"a-large": {"externalValue": "https://example.com/tenant.txt"}, "b-small": {"value": "t1"}}}]}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 1 {
		t.Fatalf("FromOpenAPI: %v, %d operations", err, len(ops))
	}
	if got := ops[0].Target.Header.Get("Tenant-Id"); got != "t1" || ops[0].Unusable != "" {
		t.Errorf("Tenant-Id %q, Unusable %q; want t1, usable", got, ops[0].Unusable)
	}
}

// TestFromOpenAPIParameterContent: a parameter described by content (a
// media type) instead of a schema is filled with its media type's
// example, as that type writes it (a JSON one as JSON text): the
// operation was said to lack an example it had, and was skipped.
func TestFromOpenAPIParameterContent(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://h"}],
		"paths": {"/a/{id}": {"post": {"operationId": "pay", "parameters": [{"name": "Idempotency-Key", "in": "header"},
			{"name": "id", "in": "path", "required": true, "content": {"text/plain": {"example": "x1"}}},
			{"name": "filter", "in": "query", "required": true, "content": {"application/json": {"schema": {"type": "object", "example": {"a": 1}}}}},
			{"name": "X-Tenant", "in": "header", "required": true, "content": {"application/json": {"examples": {"t": {"value": {"t": "eu"}}}}}}]}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 1 {
		t.Fatalf("FromOpenAPI: %v, %+v; want pay", err, ops)
	}
	o := ops[0]
	if o.Unusable != "" || o.Target.URL != "https://h/a/x1?filter=%7B%22a%22%3A1%7D" || o.Target.Header.Get("X-Tenant") != `{"t":"eu"}` {
		t.Errorf("pay: Unusable %q, URL %s, X-Tenant %q; want it usable at https://h/a/x1?filter=%%7B%%22a%%22%%3A1%%7D with X-Tenant {\"t\":\"eu\"}",
			o.Unusable, o.Target.URL, o.Target.Header.Get("X-Tenant"))
	}
}

// TestFromOpenAPIRequiredCookies: required cookie parameters are sent,
// in one Cookie header, with their examples (or defaults); one without
// makes the operation need a Cookie header (-header), as a required
// header without an example does: they were left out, and the checks
// sent requests the API refuses.
func TestFromOpenAPIRequiredCookies(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://h"}],
		"paths": {
			"/a": {"post": {"operationId": "a", "parameters": [{"name": "Idempotency-Key", "in": "header"},
				{"name": "sid", "in": "cookie", "required": true, "example": "s1"},
				{"name": "lang", "in": "cookie", "required": true, "schema": {"enum": ["en", "fr"]}},
				{"name": "theme", "in": "cookie", "example": "dark"}]}},
			"/b": {"post": {"operationId": "b", "parameters": [{"name": "Idempotency-Key", "in": "header"},
				{"name": "sid", "in": "cookie", "required": true}]}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 2 {
		t.Fatalf("FromOpenAPI: %v, %+v; want a and b", err, ops)
	}
	if a := ops[0]; a.Unusable != "" || a.Target.Header.Get("Cookie") != "lang=en; sid=s1" {
		t.Errorf("a: Unusable %q, Cookie %q; want it usable with Cookie: lang=en; sid=s1", a.Unusable, a.Target.Header.Get("Cookie"))
	}
	if b := ops[1]; b.Unusable != conformance.MissingHeaderReason("Cookie") || !slices.Equal(b.NeedsHeaders, []string{"Cookie"}) {
		t.Errorf("b: Unusable %q, NeedsHeaders %v; want it to need a Cookie header", b.Unusable, b.NeedsHeaders)
	}
}

// TestFromOpenAPIRequiredQuerystring: OpenAPI 3.2's querystring
// parameter, the whole query described by one media type, is sent with
// its example when required (a form's object encoded as a form, a
// string as written); without one the operation is unusable, naming it:
// it was left out, and the checks sent requests the API refuses.
func TestFromOpenAPIRequiredQuerystring(t *testing.T) {
	param := func(media string) string {
		return `"parameters": [{"name": "Idempotency-Key", "in": "header"}, {"name": "q", "in": "querystring", "required": true, "content": ` + media + `}]`
	}
	doc := `{"openapi": "3.2.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://h"}],
		"paths": {
			"/a": {"post": {"operationId": "a", ` + param(`{"application/x-www-form-urlencoded": {"example": {"b": "2", "a": "x y"}}}`) + `}},
			"/b": {"post": {"operationId": "b", ` + param(`{"text/plain": {"example": "x=1&y=2"}}`) + `}},
			"/c": {"post": {"operationId": "c", ` + param(`{"application/x-www-form-urlencoded": {"schema": {"type": "object"}}}`) + `}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 3 {
		t.Fatalf("FromOpenAPI: %v, %+v; want a, b, c", err, ops)
	}
	for i, want := range []string{"https://h/a?a=x+y&b=2", "https://h/b?x=1&y=2"} {
		if o := ops[i]; o.Unusable != "" || o.Target.URL != want {
			t.Errorf("%s: Unusable %q, URL %s; want it usable at %s", o.Target.Name, o.Unusable, o.Target.URL, want)
		}
	}
	saysAll(t, "c: Unusable", ops[2].Unusable, []string{"required querystring parameter q has no example"})
}

// TestFromOpenAPIPathParameterStyles: a path parameter is written as its
// style says (OpenAPI's simple by default, label, matrix), an array's or
// an object's example too: an array was sent as escaped JSON text
// ("%5B%22a%22..."), and label and matrix without their prefixes.
func TestFromOpenAPIPathParameterStyles(t *testing.T) {
	param := func(extra string) string {
		return `"parameters": [{"name": "Idempotency-Key", "in": "header"}, {"name": "v", "in": "path", "required": true` + extra + `}]`
	}
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://h"}], "paths": {
		"/a/{v}": {"post": {"operationId": "a", ` + param(`, "example": ["x", "y z"]`) + `}},
		"/b/{v}": {"post": {"operationId": "b", ` + param(`, "example": {"r": "1", "g": "2"}`) + `}},
		"/c/{v}": {"post": {"operationId": "c", ` + param(`, "explode": true, "example": {"r": "1", "g": "2"}`) + `}},
		"/d/{v}": {"post": {"operationId": "d", ` + param(`, "style": "label", "example": "5"`) + `}},
		"/e/{v}": {"post": {"operationId": "e", ` + param(`, "style": "matrix", "example": "5"`) + `}},
		"/f/{v}": {"post": {"operationId": "f", ` + param(`, "style": "matrix", "example": ["x", "y"]`) + `}},
		"/g/{v}": {"post": {"operationId": "g", ` + param(`, "example": "a/b"`) + `}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 7 {
		t.Fatalf("FromOpenAPI: %v, %+v", err, ops)
	}
	want := []string{"https://h/a/x,y%20z", "https://h/b/g,2,r,1", "https://h/c/g=2,r=1", "https://h/d/.5", "https://h/e/;v=5",
		"https://h/f/;v=x,y", "https://h/g/a%2Fb"}
	for i, o := range ops {
		if o.Unusable != "" || o.Target.URL != want[i] {
			t.Errorf("%s: Unusable %q, URL %s; want %s", o.Target.Name, o.Unusable, o.Target.URL, want[i])
		}
	}
}

// TestFromOpenAPICookieValueEncoding: a required cookie's example is
// percent-encoded, as the form style (a cookie's default) writes it, so
// that one holding "; " or a space or a quote (a JSON content example)
// is one cookie's value: it was written as it is, and "a b; admin=1"
// sent a second cookie, admin. One of OpenAPI 3.2's cookie style, which
// is sent as it is, that no cookie can carry makes the operation need a
// Cookie header, as one without an example does. An array's values are
// each encoded, joined by commas.
func TestFromOpenAPICookieValueEncoding(t *testing.T) {
	doc := `{"openapi": "3.2.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://h"}],
		"paths": {
			"/a": {"post": {"operationId": "a", "parameters": [{"name": "Idempotency-Key", "in": "header"},
				{"name": "sid", "in": "cookie", "required": true, "example": "a b; admin=1"},
				{"name": "j", "in": "cookie", "required": true, "content": {"application/json": {"example": {"x": "y"}}}},
				{"name": "raw", "in": "cookie", "required": true, "style": "cookie", "example": "v1.2"},
				{"name": "l", "in": "cookie", "required": true, "example": ["x", "y z"]}]}},
			"/b": {"post": {"operationId": "b", "parameters": [{"name": "Idempotency-Key", "in": "header"},
				{"name": "sid", "in": "cookie", "required": true, "style": "cookie", "example": "a; admin=1"}]}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 2 {
		t.Fatalf("FromOpenAPI: %v, %+v; want a and b", err, ops)
	}
	want := "j=%7B%22x%22%3A%22y%22%7D; l=x,y%20z; raw=v1.2; sid=a%20b%3B%20admin%3D1"
	if a := ops[0]; a.Unusable != "" || a.Target.Header.Get("Cookie") != want {
		t.Errorf("a: Unusable %q, Cookie %q; want it usable with Cookie: %s", a.Unusable, a.Target.Header.Get("Cookie"), want)
	}
	if b := ops[1]; !slices.Equal(b.NeedsHeaders, []string{"Cookie"}) || b.Target.Header.Get("Cookie") != "" {
		t.Errorf("b: NeedsHeaders %v, Cookie %q; want it to need a Cookie header, and send none", b.NeedsHeaders, b.Target.Header.Get("Cookie"))
	}
}

// TestFromOpenAPIPathParameterStyleEdges: a path parameter's empty value
// is written as OpenAPI's style table (RFC 6570's ifemp) says, matrix's
// ";v" without "=", and a reserved character of a name or value ("=",
// "&", "+") is percent-encoded, as RFC 6570 does, so that an exploded
// object's key=value pairs are read back as written: ";v=" was sent,
// and {"k=x": "a=b"} as ";k=x=a=b".
func TestFromOpenAPIPathParameterStyleEdges(t *testing.T) {
	param := func(extra string) string {
		return `"parameters": [{"name": "Idempotency-Key", "in": "header"}, {"name": "v", "in": "path", "required": true` + extra + `}]`
	}
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://h"}], "paths": {
		"/a/{v}": {"post": {"operationId": "a", ` + param(`, "style": "matrix", "example": ""`) + `}},
		"/b/{v}": {"post": {"operationId": "b", ` + param(`, "style": "matrix", "explode": true, "example": {"k=x": "a=b", "e": ""}`) + `}},
		"/c/{v}": {"post": {"operationId": "c", ` + param(`, "style": "label", "example": ""`) + `}},
		"/d/{v}": {"post": {"operationId": "d", ` + param(`, "example": "a&b+c"`) + `}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 4 {
		t.Fatalf("FromOpenAPI: %v, %+v", err, ops)
	}
	want := []string{"https://h/a/;v", "https://h/b/;e;k%3Dx=a%3Db", "https://h/c/.", "https://h/d/a%26b%2Bc"}
	for i, o := range ops {
		if o.Unusable != "" || o.Target.URL != want[i] {
			t.Errorf("%s: Unusable %q, URL %s; want %s", o.Target.Name, o.Unusable, o.Target.URL, want[i])
		}
	}
}

// TestFromOpenAPIQuerystringEncoding: OpenAPI 3.2's querystring is sent
// as a query a server reads back as written: a JSON example's space as
// %20, which RFC 3986 readers do not take for a "+" (it was "+"); a
// string example's space or "#" percent-encoded, where they were written
// as they are, a space making the request line malformed and "#" cutting
// the query into a fragment; and a form with a charset parameter
// ("application/x-www-form-urlencoded; charset=utf-8") encoded as a form,
// where it was refused as carrying no query.
func TestFromOpenAPIQuerystringEncoding(t *testing.T) {
	param := func(media string) string {
		return `"parameters": [{"name": "Idempotency-Key", "in": "header"}, {"name": "q", "in": "querystring", "required": true, "content": ` + media + `}]`
	}
	doc := `{"openapi": "3.2.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://h"}],
		"paths": {
			"/a": {"post": {"operationId": "a", ` + param(`{"application/json": {"example": {"q": "a b+c"}}}`) + `}},
			"/b": {"post": {"operationId": "b", ` + param(`{"text/plain": {"example": "q=a b#c&r=%41&s=50%"}}`) + `}},
			"/c": {"post": {"operationId": "c", ` + param(`{"application/x-www-form-urlencoded; charset=utf-8": {"example": {"q": "x"}}}`) + `}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 3 {
		t.Fatalf("FromOpenAPI: %v, %+v; want a, b, c", err, ops)
	}
	want := []string{"https://h/a?%7B%22q%22%3A%22a%20b%2Bc%22%7D", "https://h/b?q=a%20b%23c&r=%41&s=50%25", "https://h/c?q=x"}
	for i, o := range ops {
		if o.Unusable != "" || o.Target.URL != want[i] {
			t.Errorf("%s: Unusable %q, URL %s; want it usable at %s", o.Target.Name, o.Unusable, o.Target.URL, want[i])
		}
	}
}

// TestMissingCookieReason: an operation that needs a Cookie header (a
// required cookie parameter without an example) says a required cookie
// lacks one, and how to give it: it said "required header Cookie has no
// example", naming a header the document never declares.
func TestMissingCookieReason(t *testing.T) {
	why := conformance.MissingHeaderReason("Cookie")
	if strings.Contains(why, "required header Cookie") {
		t.Errorf("MissingHeaderReason(Cookie) = %q; want it to name a cookie, not a header", why)
	}
	saysAll(t, "MissingHeaderReason(Cookie)", why, []string{"required cookie", "-header 'Cookie: name=value"})
	if got, want := conformance.MissingHeaderReason("Tenant-Id"), "required header Tenant-Id has no example: give -header 'Tenant-Id: ...'"; got != want {
		t.Errorf("MissingHeaderReason(Tenant-Id) = %q; want %q", got, want)
	}
}

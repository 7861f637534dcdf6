package conformance_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/saferetry/saferetry/conformance"
)

// TestFromOpenAPIMalformedParameters: a parameters member that is no list
// (an object, as a hand-written document may have it), or an entry of it
// that is no object, makes its operation unusable, saying so: it was
// passed over, and the operation whose key parameter it held was dropped
// as one that takes no key. An operation or a path item that is no
// object fails the document; an extension member of paths ("x-...") is
// no path.
func TestFromOpenAPIMalformedParameters(t *testing.T) {
	for _, tc := range []struct {
		name, pathItem string
		err, unusable  []string
	}{
		{"parameters an object", `{"post": {"operationId": "pay", "parameters": {"name": "Idempotency-Key", "in": "header"}}}`,
			nil, []string{"its parameters", "not an array"}},
		{"the path item's parameters an object", `{"parameters": {"name": "Idempotency-Key", "in": "header"}, "post": {"operationId": "pay"}}`,
			nil, []string{"its path item's parameters", "not an array"}},
		{"a parameter a string", `{"post": {"operationId": "pay", "parameters": ["Idempotency-Key"]}}`,
			nil, []string{"its parameter 1", "not an object"}},
		{"an operation a string", `{"post": "Idempotency-Key"}`, []string{"POST /p", "not an object"}, nil},
		{"a path item a list", `[{"post": {}}]`, []string{"path /p", "not an object"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := conformance.FromOpenAPI(refDoc(tc.pathItem), "", "")
			if tc.err != nil {
				if err == nil {
					t.Fatalf("FromOpenAPI: no error, %d operations %+v; want an error saying %q", len(ops), ops, tc.err)
				}
				saysAll(t, "FromOpenAPI: error", err.Error(), tc.err)
				return
			}
			if err != nil || len(ops) != 1 || ops[0].Unusable == "" {
				t.Fatalf("FromOpenAPI: %v, %d operations %+v; want the one, unusable", err, len(ops), ops)
			}
			saysAll(t, "pay: Unusable", ops[0].Unusable, tc.unusable)
		})
	}
	doc := []byte(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
		"paths": {"x-internal": true, "/p": {"summary": "s", "x-owner": "me",
			"post": {"operationId": "pay", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}}`)
	if ops, err := conformance.FromOpenAPI(doc, "", ""); err != nil || len(ops) != 1 || ops[0].Unusable != "" {
		t.Errorf("FromOpenAPI with extension members: %v, %+v; want pay, usable", err, ops)
	}
}

// TestFromOpenAPIPathsNotAnObject: a paths member that is no object is an
// error saying so, not a document whose operations all lack the key.
func TestFromOpenAPIPathsNotAnObject(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
		"paths": [{"/p": {"post": {"parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}]}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "http://127.0.0.1:9")
	if err == nil || !strings.Contains(err.Error(), "paths") || !strings.Contains(err.Error(), "not an object") {
		t.Errorf("FromOpenAPI: %v, %d operations; want an error saying paths is not an object", err, len(ops))
	}
}

// TestFromOpenAPIVersionAsWritten: an openapi member that is no string
// (3.1, a number, as a hand-written document may have it) is refused
// showing it as written and saying it must be a string, not as
// `openapi: ""`, which reads as a missing member.
func TestFromOpenAPIVersionAsWritten(t *testing.T) {
	_, err := conformance.FromOpenAPI([]byte(`{"openapi": 3.1, "info": {"title": "t", "version": "1"}, "paths": {}}`), "", "http://127.0.0.1:9")
	if err == nil || !strings.Contains(err.Error(), "3.1") || !strings.Contains(err.Error(), "string") {
		t.Errorf("FromOpenAPI: %v; want an error showing 3.1 and saying the version is a string", err)
	}
}

// TestFromOpenAPIRequiredNotABoolean: a parameter's or a request body's
// required written as a string ("true", as a hand-written document may
// have it) makes its operation unusable, naming the parameter and showing
// the value: it was read as not required, so the key was not checked as
// required, and a required query parameter was not sent.
func TestFromOpenAPIRequiredNotABoolean(t *testing.T) {
	for _, tc := range []struct {
		name, pathItem string
		want           []string
	}{
		{"the key", `{"post": {"operationId": "pay", "parameters": [{"name": "Idempotency-Key", "in": "header", "required": "true"}]}}`,
			[]string{"header parameter Idempotency-Key", `required is "true"`, "boolean"}},
		{"a query parameter", `{"post": {"operationId": "pay", "parameters": [{"$ref": "#/components/parameters/Key"}, {"name": "q", "in": "query", "required": "true", "example": "x"}]}}`,
			[]string{"query parameter q", `required is "true"`, "boolean"}},
		{"the request body", `{"post": {"operationId": "pay", "parameters": [{"$ref": "#/components/parameters/Key"}],
			"requestBody": {"required": "yes", "content": {"application/json": {"schema": {"type": "object"}}}}}}`,
			[]string{"its request body", `required is "yes"`, "boolean"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := conformance.FromOpenAPI(refDoc(tc.pathItem), "", "")
			if err != nil || len(ops) != 1 {
				t.Fatalf("FromOpenAPI: %v, %+v; want pay", err, ops)
			}
			saysAll(t, "pay: Unusable", ops[0].Unusable, tc.want)
		})
	}
}

// TestFromOpenAPIMalformedRequestBody: a request body, its content, or
// a media type of it that is no object makes its operation unusable,
// saying so: it was read as no body, so a required body with an example
// was sent empty, as parameters that are no array once were.
func TestFromOpenAPIMalformedRequestBody(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"the request body a string", `"application/json"`, []string{"its request body", "not an object"}},
		{"its content a list", `{"required": true, "content": [{"application/json": {"example": {"a": 1}}}]}`,
			[]string{"its request body's content", "not an object"}},
		{"a media type a string", `{"required": true, "content": {"application/json": "{\"a\": 1}"}}`,
			[]string{"its request body's content (application/json)", "not an object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := conformance.FromOpenAPI(refDoc(`{"post": {"operationId": "pay", "parameters": [{"$ref": "#/components/parameters/Key"}], "requestBody": `+tc.body+`}}`), "", "")
			if err != nil || len(ops) != 1 {
				t.Fatalf("FromOpenAPI: %v, %+v; want pay", err, ops)
			}
			saysAll(t, "pay: Unusable", ops[0].Unusable, tc.want)
		})
	}
}

// TestFromOpenAPIPathWithoutSlash: a path that does not begin with "/"
// (which OpenAPI requires) makes its operations unusable, naming it: it
// was glued to the server URL, "https://h/v1p", and the checks sent to
// an endpoint that does not exist.
func TestFromOpenAPIPathWithoutSlash(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://h/v1"}],
		"paths": {"payments": {"post": {"operationId": "pay", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 1 {
		t.Fatalf("FromOpenAPI: %v, %+v; want pay, unusable", err, ops)
	}
	saysAll(t, "pay: Unusable", ops[0].Unusable, []string{`its path "payments" does not begin with "/"`})
}

// TestFromOpenAPIPathWithQuery: a path holding a query or a fragment
// ("/payments?type=card"), which OpenAPI's paths never hold (query
// parameters say them), makes its operations unusable, naming it: it was
// glued to the server URL and a required query after it with a second
// "?", "https://h/payments?type=card?q=1".
func TestFromOpenAPIPathWithQuery(t *testing.T) {
	op := `{"post": {"parameters": [{"name": "Idempotency-Key", "in": "header"}, {"name": "q", "in": "query", "required": true, "example": "1"}]}}`
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://h"}],
		"paths": {"/payments?type=card": ` + op + `, "/refunds#x": ` + op + `}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 2 {
		t.Fatalf("FromOpenAPI: %v, %+v; want two, unusable", err, ops)
	}
	saysAll(t, "payments: Unusable", ops[0].Unusable, []string{`its path "/payments?type=card" has a query`})
	saysAll(t, "refunds: Unusable", ops[1].Unusable, []string{`its path "/refunds#x" has a fragment`})
}

// TestFromOpenAPINotADocument: JSON that is no object (an array, a
// string, null), or an object without an openapi member, is refused
// saying what it is, not as a document whose version is "": `openapi:
// ""` named a member it never had.
func TestFromOpenAPINotADocument(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want string
	}{
		{`[{"openapi": "3.1.0"}]`, "the document is a JSON array, not an object (an OpenAPI document)"},
		{`"openapi"`, "the document is a JSON string, not an object (an OpenAPI document)"},
		{`null`, "the document is JSON null, not an object (an OpenAPI document)"},
		{`{"info": {"title": "t"}, "paths": {}}`, "the document has no openapi member (its version, such as \"3.1.0\"): only OpenAPI 3.x, as JSON, is read"},
	} {
		_, err := conformance.FromOpenAPI([]byte(tc.doc), "", "")
		if err == nil {
			t.Errorf("%s: no error", tc.doc)
			continue
		}
		saysAll(t, tc.doc+": error", err.Error(), []string{tc.want})
	}
}

// TestFromOpenAPIUTF16: a document in UTF-16 with a byte order mark, as
// Windows PowerShell's redirection writes it, is read as the JSON it
// is: it was refused as "not JSON", with a hint about YAML.
func TestFromOpenAPIUTF16(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t€", "version": "1"}, "servers": [{"url": "https://h"}],
		"paths": {"/p": {"post": {"operationId": "pay", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}}`
	units := utf16.Encode([]rune("\ufeff" + doc))
	for _, order := range []binary.AppendByteOrder{binary.LittleEndian, binary.BigEndian} {
		b := make([]byte, 0, 2*len(units))
		for _, u := range units {
			b = order.AppendUint16(b, u)
		}
		ops, err := conformance.FromOpenAPI(b, "", "")
		if err != nil || len(ops) != 1 || ops[0].Target.URL != "https://h/p" {
			t.Errorf("UTF-16 (%v): %v, %+v; want pay at https://h/p", order, err, ops)
		}
	}
}

// TestFromOpenAPIEmpty: a document that is empty, or holds only a byte
// order mark (PowerShell's redirection of nothing) or white space, is
// refused saying it is empty: it was said to be "not JSON: EOF".
func TestFromOpenAPIEmpty(t *testing.T) {
	for _, doc := range []string{"", " \r\n", "\xff\xfe", "\xfe\xff", "\xef\xbb\xbf", "\xff\xfe \x00\n\x00"} {
		_, err := conformance.FromOpenAPI([]byte(doc), "", "")
		if err == nil {
			t.Errorf("%q: no error", doc)
			continue
		}
		saysAll(t, fmt.Sprintf("%q: error", doc), err.Error(), []string{"the OpenAPI document is empty"})
	}
}

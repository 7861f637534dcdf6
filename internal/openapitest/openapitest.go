// Package openapitest holds OpenAPI 3.1 documents, and the requests and
// answers of a live server, to a real validator: pb33f/libopenapi parses a
// document and libopenapi-validator checks it against the OpenAPI 3.1
// schema, and messages against its operations (parameters, bodies and
// headers by their JSON Schema 2020-12 schemas, and statuses the operation
// does not declare). Only tests import it, so the validator is a
// dependency of no package that users compile.
//
// libopenapi-validator rather than kin-openapi: it checks a document
// against the official OpenAPI 3.1 schema, which kin-openapi v0.153's
// hand-written Validate does not (it takes a response status "2000" and a
// 3.1 document with none of paths, components and webhooks;
// TestParseRefusesInvalid holds both).
package openapitest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/errors"
)

// Doc is a parsed and valid OpenAPI 3.1 document. Its methods are not
// safe for concurrent use.
type Doc struct {
	v validator.Validator
}

// Parse parses document and validates it against the OpenAPI 3.1 schema,
// returning every problem found; a document of another version of OpenAPI
// is refused.
func Parse(document []byte) (*Doc, []string) {
	doc, err := libopenapi.NewDocument(document)
	if err != nil {
		return nil, []string{"parse: " + err.Error()}
	}
	if v := doc.GetVersion(); !strings.HasPrefix(v, "3.1.") {
		return nil, []string{fmt.Sprintf("openapi %q, want 3.1.x", v)}
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		out := make([]string, len(errs))
		for i, e := range errs {
			out[i] = "model: " + e.Error()
		}
		return nil, out
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, describe(verrs)
	}
	return &Doc{v: v}, nil
}

// Load is Parse that fails t on a problem.
func Load(t testing.TB, document []byte) *Doc {
	t.Helper()
	d, problems := Parse(document)
	for _, p := range problems {
		t.Errorf("invalid OpenAPI 3.1 document: %s", p)
	}
	if d == nil {
		t.FailNow()
	}
	return d
}

// Request returns what is wrong with r by the document (nothing when r is
// a valid request of one of its operations). r's body is read and restored.
func (d *Doc) Request(r *http.Request) []string {
	_, errs := d.v.ValidateHttpRequestSync(r)
	return describe(errs)
}

// Response returns what is wrong with resp, the answer to r, by the
// document: a status the operation does not declare, a body or a header
// its schemas refuse. resp's body is read and restored.
func (d *Doc) Response(r *http.Request, resp *http.Response) []string {
	_, errs := d.v.ValidateHttpResponse(r, resp)
	return describe(errs)
}

func describe(errs []*errors.ValidationError) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		s := e.Message
		if e.Reason != "" {
			s += ": " + e.Reason
		}
		for _, f := range e.SchemaValidationErrors {
			s += fmt.Sprintf(" [%s: %s]", f.FieldPath, f.Reason)
		}
		out = append(out, s)
	}
	return out
}

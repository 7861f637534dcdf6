package mockserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/internal/openapitest"
)

// TestOpenAPICoversRoutes: every path and method of the payments API is
// described, and the description has no operation the server lacks.
func TestOpenAPICoversRoutes(t *testing.T) {
	s := &Server{}
	doc := openAPIDocument(s.idempotencyOptions(defaultConfig()))
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	served := map[string][]string{}
	for _, rt := range s.apiRoutes(nil) {
		for m := range rt.methods {
			served[rt.pattern] = append(served[rt.pattern], strings.ToLower(m))
		}
	}
	for path, ms := range served {
		for _, m := range ms {
			if _, ok := d.Paths[path][m]; !ok {
				t.Errorf("%s %s is served but not described", strings.ToUpper(m), path)
			}
		}
	}
	for path, ops := range d.Paths {
		for m := range ops {
			if !slices.Contains(served[path], m) {
				t.Errorf("%s %s is described but not served", strings.ToUpper(m), path)
			}
		}
	}
}

// TestOpenAPIPaymentRequest: the document's PaymentRequest schema takes
// the bodies that the handler takes, and refuses those it refuses.
func TestOpenAPIPaymentRequest(t *testing.T) {
	doc := openapitest.Load(t, openAPIDocument((&Server{}).idempotencyOptions(defaultConfig())))
	for _, tt := range paymentRequestTests {
		r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(tt.body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "k")
		p := doc.Request(r)
		if (len(p) == 0) != (len(tt.wantFields) == 0) {
			t.Errorf("%s: the handler finds %q at fault, the document %v", tt.name, tt.wantFields, p)
		}
	}
}

package openapitest

import "testing"

// TestParseRefusesInvalid shows that Parse checks documents against the
// OpenAPI 3.1 schema: each of these breaks one of its rules.
func TestParseRefusesInvalid(t *testing.T) {
	valid := `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/a":{"post":{"responses":{"200":{"description":"ok"}}}}}}`
	if _, p := Parse([]byte(valid)); len(p) > 0 {
		t.Fatalf("a valid document is refused: %v", p)
	}
	for name, doc := range map[string]string{
		"no info":                          `{"openapi":"3.1.0","paths":{}}`,
		"response sans description":        `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/a":{"post":{"responses":{"200":{}}}}}}`,
		"parameter in body":                `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/a":{"post":{"parameters":[{"name":"k","in":"body","schema":{}}],"responses":{"200":{"description":"ok"}}}}}}`,
		"bad status key":                   `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/a":{"post":{"responses":{"2000":{"description":"ok"}}}}}}`,
		"no paths, components or webhooks": `{"openapi":"3.1.0","info":{"title":"t","version":"1"}}`,
		"OpenAPI 3.0":                      `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{}}`,
		"not JSON":                         `{"openapi":`,
	} {
		if _, p := Parse([]byte(doc)); len(p) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}

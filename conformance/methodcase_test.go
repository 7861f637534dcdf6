package conformance_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/conformance"
)

// TestFromOpenAPIAdditionalOperationToken: an additionalOperations
// entry is sendable exactly when its name is an RFC 9110 token (one or
// more of the letters, digits and !#$%&'*+-.^_`|~), whatever its case;
// one that is not is unusable, saying it is no HTTP method and naming
// it.
func TestFromOpenAPIAdditionalOperationToken(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"LINK", true}, {"link", true}, {"M-SEARCH", true}, {"X_Y.Z!~", true}, {"B1", true},
		{"LINK NOW", false}, {"LI(NK)", false}, {"LINK/2", false}, {"LINK:", false}, {"{LINK}", false},
		{`LI\"NK`, false}, {"LİNK", false}, {"LINK\\t", false}, {"@", false}, {"a,b", false},
	} {
		key := `"parameters": [{"name": "Idempotency-Key", "in": "header"}]`
		doc := []byte(`{"openapi": "3.2.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://h"}], "paths": {
			"/links": {"additionalOperations": {"` + tc.name + `": {` + key + `}}}}}`)
		ops, err := conformance.FromOpenAPI(doc, "", "")
		if err != nil || len(ops) != 1 {
			t.Errorf("%s: FromOpenAPI: %v, %+v", tc.name, err, ops)
			continue
		}
		o := ops[0]
		switch {
		case tc.ok && o.Unusable != "":
			t.Errorf("%s: Unusable %q; want it usable", tc.name, o.Unusable)
		case !tc.ok && (!strings.Contains(o.Unusable, "not an HTTP method") || !strings.Contains(o.Unusable, "RFC 9110 token") ||
			!strings.Contains(o.Unusable, fmt.Sprintf("additionalOperations entry %q", o.Target.Method))):
			t.Errorf("%s: Unusable %q; want it to say its entry %q is not an HTTP method (an RFC 9110 token)", tc.name, o.Unusable, o.Target.Method)
		}
	}
}

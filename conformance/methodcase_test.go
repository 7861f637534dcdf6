package conformance_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
)

// TestAdditionalOperationSentAsWritten: an OpenAPI 3.2
// additionalOperations entry's name is the method as it is sent, its
// case included (RFC 9110's methods are case-sensitive): every request
// of a run, and its plan, carry "Link" as written. They were sent as
// "LINK", another method.
func TestAdditionalOperationSentAsWritten(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	doc := []byte(`{"openapi": "3.2.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "` + srv.URL + `"}], "paths": {
		"/links": {"additionalOperations": {"Link": {"operationId": "link",
			"parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}}}`)
	ops, err := conformance.FromOpenAPI(doc, "", "")
	if err != nil || len(ops) != 1 || ops[0].Unusable != "" {
		t.Fatalf("FromOpenAPI: %v, %+v; want one usable operation", err, ops)
	}
	c := &conformance.Checker{Concurrency: 2, Timeout: 5 * time.Second}
	planned, err := c.Plan(ops[0].Target)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range planned {
		if p.Request.Method != "Link" && p.Request.Method != http.MethodGet {
			t.Errorf("planned %s: method %q; want %q", p.Check, p.Request.Method, "Link")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := c.Run(ctx, ops[0].Target)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if rep.Method != "Link" || seen["Link"] == 0 || len(seen) != 1 {
		t.Errorf("report method %q, methods received %v; want every request sent as Link", rep.Method, seen)
	}
}

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

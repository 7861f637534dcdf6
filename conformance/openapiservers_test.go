package conformance_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/conformance"
)

// TestFromOpenAPIServerOverrides: a path item's servers, and an
// operation's, replace the document's for its operations (as Stripe's
// description sends file uploads to another host): the operation is sent
// there, its variables at their defaults, a relative one resolved against
// the document's URL; a base URL given (-url) still wins over all.
func TestFromOpenAPIServerOverrides(t *testing.T) {
	doc, err := os.ReadFile("testdata/openapi/servers-override.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		base string
		want map[string]string
	}{
		{"", map[string]string{
			"PostCharges": "https://api.example.com/v1/charges",
			"PostFiles":   "https://files.example.com/v1/files",
			"PutFiles":    "https://eu.uploads.example.com/u/v1/files",
			"PostExports": "https://docs.example.com/bulk/v1/exports",
		}},
		{"http://127.0.0.1:9", map[string]string{
			"PostCharges": "http://127.0.0.1:9/v1/charges",
			"PostFiles":   "http://127.0.0.1:9/v1/files",
			"PutFiles":    "http://127.0.0.1:9/v1/files",
			"PostExports": "http://127.0.0.1:9/v1/exports",
		}},
	} {
		ops, err := conformance.FromOpenAPI(doc, "https://docs.example.com/spec/openapi.json", tc.base)
		if err != nil || len(ops) != len(tc.want) {
			t.Fatalf("base %q: FromOpenAPI: %v, %d operations", tc.base, err, len(ops))
		}
		for _, o := range ops {
			if got := o.Target.URL; got != tc.want[o.Target.Name] {
				t.Errorf("base %q: %s URL %s, want %s", tc.base, o.Target.Name, got, tc.want[o.Target.Name])
			}
		}
	}
}

// TestFromOpenAPIServerVariableWithoutDefault: a path item's server whose
// variable has no default (the document breaks the spec, as hand-written
// ones do) makes that path's operations unusable, naming the variable,
// instead of failing the whole document (the other paths, on the
// document's server, are still checked) or sending "%7Bbase%7D" in the
// URL; a variable with an enum and no default takes its first value.
func TestFromOpenAPIServerVariableWithoutDefault(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
		"paths": {
			"/a": {"servers": [{"url": "https://{region}.example.com"}],
				"post": {"operationId": "a", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}},
			"/b": {"servers": [{"url": "https://api.example.com/{base}", "variables": {"base": {"description": "no default"}}}],
				"post": {"operationId": "b", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}},
			"/c": {"post": {"operationId": "c", "parameters": [{"name": "Idempotency-Key", "in": "header"}],
				"servers": [{"url": "https://{region}.example.com", "variables": {"region": {"enum": ["eu", "us"]}}}]}},
			"/d": {"post": {"operationId": "d", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 4 {
		t.Fatalf("FromOpenAPI: %v, %d operations; want the 4, those on a server with a variable without default unusable", err, len(ops))
	}
	for i, why := range []string{"variable region is not declared", "variable base has no default"} {
		if o := ops[i]; !strings.Contains(o.Unusable, "server URL") || !strings.Contains(o.Unusable, why) {
			t.Errorf("%s: URL %s, Unusable %q; want it unusable for its server's variable: %s", o.Target.Name, o.Target.URL, o.Unusable, why)
		}
	}
	if got, want := ops[2].Target.URL, "https://eu.example.com/c"; got != want || ops[2].Unusable != "" {
		t.Errorf("c: URL %s, Unusable %q; want %s, usable (the enum's first value)", got, ops[2].Unusable, want)
	}
	if got, want := ops[3].Target.URL, "http://127.0.0.1:9/d"; got != want || ops[3].Unusable != "" {
		t.Errorf("d: URL %s, Unusable %q; want %s, usable", got, ops[3].Unusable, want)
	}
}

// TestFromOpenAPIServerVariableMessages: a server variable's default
// written as a number (a port, as hand-written documents have it) is
// taken as its digits, where it was said to have "no default"; a
// variable the server does not declare is said to be undeclared, not to
// lack a default; a document without servers, read from a file, is said
// to name none, not to have the relative server URL "/" it never wrote.
func TestFromOpenAPIServerVariableMessages(t *testing.T) {
	key := `"post": {"operationId": "%s", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}`
	doc := fmt.Sprintf(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],
		"paths": {
			"/a": {"servers": [{"url": "https://h:{port}/v1", "variables": {"port": {"default": 8443}}}], `+key+`},
			"/b": {"servers": [{"url": "https://{region}.example.com", "variables": {"zone": {"default": "z"}}}], `+key+`},
			"/c": {"servers": [{"url": "https://{region}.example.com", "variables": {"region": {"default": {"eu": 1}}}}], `+key+`}}}`,
		"a", "b", "c")
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 3 {
		t.Fatalf("FromOpenAPI: %v, %d operations; want a, b, c", err, len(ops))
	}
	if a := ops[0]; a.Target.URL != "https://h:8443/v1/a" || a.Unusable != "" {
		t.Errorf("a: URL %s, Unusable %q; want https://h:8443/v1/a, usable", a.Target.URL, a.Unusable)
	}
	saysAll(t, "b: Unusable", ops[1].Unusable, []string{`"https://{region}.example.com"`, "variable region is not declared", "-url"})
	saysAll(t, "c: Unusable", ops[2].Unusable, []string{`"https://{region}.example.com"`, `variable region's default {"eu":1} is not a string`, "-url"})

	_, err = conformance.FromOpenAPI([]byte(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"},
		"paths": {"/d": {`+fmt.Sprintf(key, "d")+`}}}`), "", "")
	if err == nil {
		t.Fatal("a document without servers, no base URL: no error")
	}
	saysAll(t, "error", err.Error(), []string{"the document names no server", "-url"})
}

// TestFromOpenAPIBaseWithQuery: a base URL (-url) or a server URL with a
// query or a fragment, after which no path can go, is refused, saying
// so, and so is a base URL that is not absolute: the path was glued
// after the query ("http://h/api?x=1/p"), or every operation refused
// one by one at run time. A path item's server makes only its
// operations unusable.
func TestFromOpenAPIBaseWithQuery(t *testing.T) {
	doc := func(servers string) []byte {
		return []byte(`{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}` + servers + `,
			"paths": {"/p": {"post": {"operationId": "pay", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}},
				"/q": {"servers": [{"url": "https://h/v1#top"}], "post": {"operationId": "q", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}}`)
	}
	for _, tc := range []struct {
		servers, base string
		err           []string
	}{
		{"", "http://127.0.0.1:9/api?x=1", []string{`base URL "http://127.0.0.1:9/api?x=1" (-url)`, "query"}},
		{"", "http://127.0.0.1:9/api#x", []string{`base URL "http://127.0.0.1:9/api#x" (-url)`, "fragment"}},
		{"", "/api", []string{`base URL "/api" (-url)`, "not an absolute http or https URL"}},
		{`, "servers": [{"url": "https://h/v1?tenant=a"}]`, "", []string{`the document's server URL "https://h/v1?tenant=a"`, "query"}},
	} {
		ops, err := conformance.FromOpenAPI(doc(tc.servers), "", tc.base)
		if err == nil {
			t.Errorf("base %q, servers %s: no error, %+v", tc.base, tc.servers, ops)
			continue
		}
		saysAll(t, "error", err.Error(), tc.err)
	}
	ops, err := conformance.FromOpenAPI(doc(`, "servers": [{"url": "https://h/v1"}]`), "", "")
	if err != nil || len(ops) != 2 || ops[0].Unusable != "" {
		t.Fatalf("FromOpenAPI: %v, %+v; want pay usable, q unusable", err, ops)
	}
	saysAll(t, "q: Unusable", ops[1].Unusable, []string{`server URL "https://h/v1#top"`, "fragment"})
}

// TestFromOpenAPISelf: OpenAPI 3.2's $self, the document's own URI, is
// the base a relative server URL resolves against (itself resolved
// against the URL the document was read from): a document read from a
// file with "$self" and a relative server was refused as relative.
func TestFromOpenAPISelf(t *testing.T) {
	doc := func(self string) []byte {
		return []byte(`{"openapi": "3.2.0", "$self": "` + self + `", "info": {"title": "t", "version": "1"}, "servers": [{"url": "/v1"}],
			"paths": {"/p": {"post": {"operationId": "pay", "parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}}`)
	}
	for _, tc := range []struct{ self, docURL, want string }{
		{"https://api.example.com/specs/openapi.json", "", "https://api.example.com/v1/p"},
		{"https://api.example.com/specs/openapi.json", "https://mirror.example.org/openapi.json", "https://api.example.com/v1/p"},
		{"/other/openapi.json", "https://docs.example.com/openapi.json", "https://docs.example.com/v1/p"},
	} {
		ops, err := conformance.FromOpenAPI(doc(tc.self), tc.docURL, "")
		if err != nil || len(ops) != 1 || ops[0].Target.URL != tc.want {
			t.Errorf("$self %s, read from %q: %v, %+v; want pay at %s", tc.self, tc.docURL, err, ops, tc.want)
		}
	}
}

// TestFromOpenAPIServerNotHTTP: a server URL that is, or resolves to, no
// http or https URL (an ftp one, or a relative one against a $self that
// is a URN, as 3.2 allows) is refused, saying so, for the document's
// server, and makes an operation with it of its own unusable: it was
// returned as the operation's URL ("urn:///v1/p"), which Run and Plan
// then refused, so that -dry-run stopped at it.
func TestFromOpenAPIServerNotHTTP(t *testing.T) {
	key := `"parameters": [{"name": "Idempotency-Key", "in": "header"}]`
	for _, tc := range []struct{ self, server string }{
		{"", "ftp://files.example.com/v1"},
		{"urn:example:payments-api", "/v1"},
	} {
		doc := `{"openapi": "3.2.0", "$self": "` + tc.self + `", "info": {"title": "t", "version": "1"}, "servers": [{"url": "` + tc.server + `"}],
			"paths": {"/p": {"post": {"operationId": "pay", ` + key + `}}}}`
		ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
		if err == nil {
			t.Errorf("server %s, $self %q: no error; operations %+v", tc.server, tc.self, ops)
			continue
		}
		saysAll(t, "error", err.Error(), []string{fmt.Sprintf("server URL %q", tc.server), "not an http or https URL", "-url"})
	}

	doc := `{"openapi": "3.2.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://h"}],
		"paths": {"/p": {"post": {"operationId": "pay", "servers": [{"url": "ftp://h/v1"}], ` + key + `}}}}`
	ops, err := conformance.FromOpenAPI([]byte(doc), "", "")
	if err != nil || len(ops) != 1 {
		t.Fatalf("FromOpenAPI: %v, %+v; want pay, unusable", err, ops)
	}
	saysAll(t, "pay: Unusable", ops[0].Unusable, []string{`server URL "ftp://h/v1"`, "not an http or https URL"})
}

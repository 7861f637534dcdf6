package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenAPIRequiredHeaderFromFlag: an operation whose required header
// (a tenant, an API version) has no example is skipped, naming the header
// and -header, rather than checked with requests the API refuses; a
// -header giving it makes the operation usable, together with -body when
// its body lacks an example too.
func TestOpenAPIRequiredHeaderFromFlag(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {
		"/payments": {"post": {"operationId": "createPayment",
			"parameters": [{"name": "Idempotency-Key", "in": "header", "required": true},
				{"name": "tenant-id", "in": "header", "required": true, "schema": {"type": "string"}}],
			"requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}}}}}}}`
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flags  []string
		usable bool
		reason string
	}{
		{nil, false, "request body"},
		{[]string{"-body", payBody}, false, "required header Tenant-Id has no example: give -header"},
		{[]string{"-header", "Tenant-Id: t1"}, false, "request body"},
		{[]string{"-body", payBody, "-header", "tenant-id: t1"}, true, ""},
	} {
		args := append([]string{"check", "-dry-run", "-openapi", file, "-url", "http://127.0.0.1:9"}, tc.flags...)
		code, stdout, stderr := runCLI(t, args...)
		planned := code == 0 && strings.Contains(stdout, "POST http://127.0.0.1:9/payments")
		if planned != tc.usable || !tc.usable && !strings.Contains(stderr, tc.reason) {
			t.Errorf("%q: exit %d\nstdout:\n%.300s\nstderr:\n%s\nwant planned %v, a skip saying %q", tc.flags, code, stdout, stderr, tc.usable, tc.reason)
		}
	}
}

// TestOpenAPIDryRunShowsHeaders: -dry-run shows the header parameters
// the document's examples make every request carry (a version, a
// tenant), which the requests' lines do not, so that what is sent can be
// read before it is; a -header's value (a token, perhaps) is not printed,
// only that it replaces the document's.
func TestOpenAPIDryRunShowsHeaders(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {
		"/payments": {"post": {"operationId": "createPayment",
			"parameters": [{"name": "Idempotency-Key", "in": "header", "required": true},
				{"name": "api-version", "in": "query", "required": true, "example": "1.0"},
				{"name": "X-Api-Version", "in": "header", "required": true, "example": "2024-06-01"},
				{"name": "Tenant-Id", "in": "header", "required": true, "example": "t-doc"}],
			"requestBody": {"required": true, "content": {"application/json": {"example": {"amount": 1}}}}}}}}`
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "check", "-dry-run", "-openapi", file, "-url", "http://127.0.0.1:9",
		"-header", "Tenant-Id: t-secret")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	for _, want := range []string{"http://127.0.0.1:9/payments?api-version=1.0", "X-Api-Version: 2024-06-01", "Tenant-Id"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the dry run lacks %q:\n%.600s", want, stdout)
		}
	}
	if strings.Contains(stdout, "t-secret") || strings.Contains(stdout, "t-doc") {
		t.Errorf("the dry run shows the -header's value, or the document's it replaces:\n%.600s", stdout)
	}
}

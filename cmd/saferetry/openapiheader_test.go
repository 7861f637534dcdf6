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

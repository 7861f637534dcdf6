package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenAPIRefusesMethod: with -openapi each operation's method comes
// from the document, so a -method given with it is refused (exit 2)
// rather than silently dropped: "-method PATCH" must not check a POST as
// if it had been asked for.
func TestOpenAPIRefusesMethod(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {"/payments": {
		"post": {"operationId": "createPayment",
			"parameters": [{"name": "Idempotency-Key", "in": "header", "required": true}],
			"requestBody": {"required": true, "content": {"application/json": {"example": ` + payBody + `}}}}}}}`
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{"PATCH", "POST"} {
		code, stdout, stderr := runCLI(t, "check", "-dry-run", "-openapi", file, "-url", "http://127.0.0.1:9", "-method", method)
		if code != 2 || !strings.Contains(stderr, "-method") || stdout != "" {
			t.Errorf("-openapi with -method %s: exit %d\nstdout:\n%.300s\nstderr:\n%s\nwant exit 2 and an error naming -method", method, code, stdout, stderr)
		}
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenAPIEmptyMethodSkipped: an additionalOperations entry named ""
// is skipped as the one operation it is, saying its method name is
// empty, on stderr and in -json: it was reported as the operations of
// its path ("skipping the operations of path /links").
func TestOpenAPIEmptyMethodSkipped(t *testing.T) {
	doc := `{"openapi": "3.2.0", "info": {"title": "t", "version": "1"}, "paths": {
		"/links": {"additionalOperations": {"": {"parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}}}`
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "check", "-openapi", file, "-url", "http://127.0.0.1:9", "-json")
	const line = `saferetry check: skipping "" /links ("" /links): its additionalOperations entry "" has an empty method name`
	if code != 2 || !strings.Contains(stderr, line) || strings.Contains(stderr, "operations of path") {
		t.Errorf("exit %d, stderr:\n%s\nwant 2, saying %q", code, stderr, line)
	}
	var js struct {
		Skipped []map[string]string `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(stdout), &js); err != nil {
		t.Fatalf("-json output does not parse: %v\n%s", err, stdout)
	}
	if len(js.Skipped) != 1 || js.Skipped[0]["target"] != `"" /links` || js.Skipped[0]["path"] != "/links" ||
		!strings.Contains(js.Skipped[0]["reason"], "empty method name") {
		t.Errorf("-json skipped %v; want the operation \"\" /links, saying its method name is empty", js.Skipped)
	}
}

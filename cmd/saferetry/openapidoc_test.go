package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenAPITooLarge: a document served larger than the bound read is
// refused saying so, not cut at the bound and then reported as "not
// JSON: unexpected EOF", which sends its owner looking for a syntax error.
func TestOpenAPITooLarge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"openapi": "3.1.0", "x-padding": "`))
		_, _ = w.Write([]byte(strings.Repeat("x", maxDocument)))
		_, _ = w.Write([]byte(`", "paths": {}}`))
	}))
	defer srv.Close()
	code, _, stderr := runCLI(t, "check", "-dry-run", "-openapi", srv.URL+"/openapi.json")
	if code != 2 || !strings.Contains(stderr, "larger than") {
		t.Errorf("exit %d, stderr %q; want 2 and the document said to be larger than the bound", code, stderr)
	}
}

// TestOpenAPIRefusedFormats: a YAML document and a Swagger 2.0 one are
// refused saying what is read (OpenAPI 3.x as JSON) and what to do; a
// JSON document that starts with a UTF-8 byte order mark (as Windows
// tools write it) is read.
func TestOpenAPIRefusedFormats(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"openapi.yaml", "openapi: 3.0.3\ninfo:\n  title: t\n  version: '1'\npaths: {}\n", "YAML"},
		{"swagger.json", `{"swagger": "2.0", "info": {"title": "t", "version": "1"}, "paths": {}}`, "Swagger 2.0"},
		{"bom.json", "\ufeff" + `{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/p": {"post": {
			"parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}}`, ""},
	} {
		file := filepath.Join(dir, tc.name)
		if err := os.WriteFile(file, []byte(tc.doc), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runCLI(t, "check", "-dry-run", "-openapi", file, "-url", "http://127.0.0.1:9")
		if tc.want == "" {
			if code != 0 {
				t.Errorf("%s: exit %d, stderr %q; want it read", tc.name, code, stderr)
			}
			continue
		}
		if code != 2 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "JSON") {
			t.Errorf("%s: exit %d, stderr %q; want 2, naming %s and saying JSON is read", tc.name, code, stderr, tc.want)
		}
	}
}

// TestOpenAPIHTMLPage: -openapi given the URL of an API's documentation
// page, not of its document, is told that it got HTML, not that its YAML
// should be converted to JSON (there is no YAML).
func TestOpenAPIHTMLPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("\n<!DOCTYPE html>\n<html><head><title>API reference</title></head><body></body></html>\n"))
	}))
	defer srv.Close()
	code, _, stderr := runCLI(t, "check", "-dry-run", "-openapi", srv.URL+"/docs")
	if code != 2 || !strings.Contains(stderr, "HTML") || strings.Contains(stderr, "YAML") {
		t.Errorf("exit %d, stderr %q; want 2, saying the document is HTML, not YAML", code, stderr)
	}
}

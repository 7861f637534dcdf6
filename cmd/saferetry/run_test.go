package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/mockserver"
)

// TestUnreachableTargetFailsReports: a target that could not be reached
// is no pass in -json (passed false, the target under "errors") nor in
// -junit (a test case in error), as it is not in the exit status (2).
func TestUnreachableTargetFailsReports(t *testing.T) {
	junit := filepath.Join(t.TempDir(), "report.xml")
	url := closedURL(t)
	code, stdout, stderr := runCLI(t, "check", "-url", url, "-body", payBody, "-json", "-junit", junit)
	if code != 2 {
		t.Fatalf("exit %d, want 2; stderr %s", code, stderr)
	}
	var doc struct {
		Passed bool `json:"passed"`
		Errors []struct {
			Target, Error string
		} `json:"errors"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("-json output does not parse: %v\n%s", err, stdout)
	}
	if doc.Passed || len(doc.Errors) != 1 || doc.Errors[0].Target != "POST "+url || doc.Errors[0].Error == "" {
		t.Errorf("-json for a target that could not be reached:\n%s", stdout)
	}
	raw, err := os.ReadFile(junit)
	if err != nil {
		t.Fatalf("-junit: %v", err)
	}
	if n := junitTotals(t, raw); n.Errors != 1 || !strings.Contains(string(raw), "<error") {
		t.Errorf("-junit for a target that could not be reached:\n%s", raw)
	}
}

// TestOpenAPIBodyKeepsUnfilledPathSkipped: -body makes an operation that
// lacks only a body example usable, but not one whose path parameter has
// no example: that one is skipped, not checked at a URL holding
// "{account}".
func TestOpenAPIBodyKeepsUnfilledPathSkipped(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {
		"/accounts/{account}/payments": {"post": {"operationId": "createAccountPayment",
			"parameters": [{"name": "account", "in": "path", "required": true, "schema": {"type": "string"}},
				{"name": "Idempotency-Key", "in": "header", "required": true}],
			"requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}}}}},
		"/payments": {"post": {"operationId": "createPayment",
			"parameters": [{"name": "Idempotency-Key", "in": "header", "required": true}],
			"requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}}}}}}}`
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "check", "-dry-run", "-openapi", file, "-url", "http://127.0.0.1:9", "-body", payBody)
	if code != 0 || strings.Contains(stdout, "{account}") || !strings.Contains(stderr, "path parameter account has no example") ||
		!strings.Contains(stdout, "POST http://127.0.0.1:9/payments") {
		t.Fatalf("exit %d: want the operation with an unfilled path parameter skipped and the other planned\nstdout:\n%.600s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestBadMethodIsInvalid: a -method that is no HTTP method is reported as
// invalid (exit 2), not as an endpoint that cannot be reached, and
// -dry-run refuses it too.
func TestBadMethodIsInvalid(t *testing.T) {
	code, _, stderr := runCLI(t, "check", "-url", closedURL(t), "-method", "BAD METHOD", "-body", payBody)
	if code != 2 || strings.Contains(stderr, "cannot reach it") || !strings.Contains(stderr, "invalid") {
		t.Errorf("exit %d, stderr %q: want 2 and the method reported as invalid", code, stderr)
	}
	code, _, stderr = runCLI(t, "check", "-dry-run", "-url", "http://127.0.0.1:9/p", "-method", "BAD METHOD")
	if code != 2 || !strings.Contains(stderr, "invalid") {
		t.Errorf("-dry-run -method %q: exit %d, stderr %q; want 2 and invalid", "BAD METHOD", code, stderr)
	}
}

// TestStrictFailsOnShould: against an endpoint that keeps every MUST but
// runs a request without a key (missing-key, a SHOULD, fails), check
// exits 0, and 1 with -strict, which names the failed SHOULD; -strict
// against an endpoint that fails nothing exits 0.
func TestStrictFailsOnShould(t *testing.T) {
	var n atomic.Int64
	mw := idempotency.Middleware(memstore.New()) // a key is not required
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strconv.FormatInt(n.Add(1), 10)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/things/"+id)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"` + id + `"}`))
	})))
	defer srv.Close()
	args := []string{"check", "-url", srv.URL + "/things", "-body", payBody, "-key-required", "-concurrency", "4"}

	code, stdout, stderr := runCLI(t, args...)
	if code != 0 || !strings.Contains(stdout, "FAIL    SHOULD  missing-key") {
		t.Fatalf("without -strict: exit %d, want 0 with missing-key failed\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, append(args, "-strict")...)
	if code != 1 || !strings.Contains(stderr, "missing-key") {
		t.Errorf("-strict: exit %d, want 1 and the failed SHOULD named on stderr\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	mock := mockserver.New()
	defer mock.Close()
	code, stdout, stderr = runCLI(t, "check", "-url", mock.URL+"/payments", "-body", payBody, "-key-required", "-strict")
	if code != 0 {
		t.Errorf("-strict against the mock server: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

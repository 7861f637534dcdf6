package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestOpenAPISkippedInReports: an operation -openapi skips is in the
// -json report (under "skipped", with why) and in the -junit report (a
// test case skipped, with why), not only on stderr: a CI job that reads
// them showed green with an operation never checked. It fails neither
// report nor the exit status.
func TestOpenAPISkippedInReports(t *testing.T) {
	mock := mockserver.New()
	defer mock.Close()
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {
		"/payments": {"post": {"operationId": "createPayment",
			"parameters": [{"name": "Idempotency-Key", "in": "header", "required": true}],
			"requestBody": {"required": true, "content": {"application/json": {"example": ` + payBody + `}}}}},
		"/refunds/{id}": {"post": {"operationId": "createRefund",
			"parameters": [{"name": "Idempotency-Key", "in": "header"}, {"name": "id", "in": "path", "required": true}]}}}}`
	code, stdout, stderr, raw := checkWithReports(t, doc, "-url", mock.URL, "-concurrency", "4")
	if code != 0 || !strings.Contains(stderr, "skipping createRefund") {
		t.Fatalf("exit %d, want 0 with createRefund skipped\nstdout:\n%.600s\nstderr:\n%s", code, stdout, stderr)
	}
	const why = "path parameter id has no example"

	var js struct {
		Passed  bool `json:"passed"`
		Targets []struct {
			Target string `json:"target"`
		} `json:"targets"`
		Errors  []json.RawMessage `json:"errors"`
		Skipped []struct {
			Target string `json:"target"`
			Reason string `json:"reason"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(stdout), &js); err != nil {
		t.Fatalf("-json output does not parse: %v\n%s", err, stdout)
	}
	if !js.Passed || len(js.Targets) != 1 || js.Targets[0].Target != "createPayment" || len(js.Errors) != 0 {
		t.Errorf("-json: passed %v, targets %+v, errors %d; want true, createPayment checked, no error", js.Passed, js.Targets, len(js.Errors))
	}
	if len(js.Skipped) != 1 || js.Skipped[0].Target != "createRefund" || !strings.Contains(js.Skipped[0].Reason, why) {
		t.Errorf("-json: skipped %+v; want createRefund, saying %q", js.Skipped, why)
	}

	var ju struct {
		Suites []struct {
			Name    string `xml:"name,attr"`
			Skipped int    `xml:"skipped,attr"`
			Cases   []struct {
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &ju); err != nil {
		t.Fatalf("-junit file does not parse: %v\n%s", err, raw)
	}
	found := false
	for _, s := range ju.Suites {
		if s.Name == "createRefund" {
			found = s.Skipped == 1 && len(s.Cases) == 1 && s.Cases[0].Skipped != nil && strings.Contains(s.Cases[0].Skipped.Message, why)
		}
	}
	if !found || junitTotals(t, raw).Errors != 0 {
		t.Errorf("-junit: want a suite createRefund of one test case skipped, saying %q, and no error:\n%s", why, raw)
	}
}

// TestOpenAPIAllSkippedReports: when -openapi skips every operation, the
// -json report and the -junit file are still written, each operation in
// them as skipped, and -json's passed is false: a CI job that reads them
// found nothing (no JSON to parse, no JUnit file) and could not tell
// why. The exit status is 2, as nothing was checked.
func TestOpenAPIAllSkippedReports(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {
		"/refunds/{id}": {"post": {"operationId": "createRefund",
			"parameters": [{"name": "Idempotency-Key", "in": "header"}, {"name": "id", "in": "path", "required": true}]}}}}`
	code, stdout, stderr, raw := checkWithReports(t, doc, "-url", "http://127.0.0.1:1")
	if code != 2 || !strings.Contains(stderr, "skipping createRefund") || !strings.Contains(stderr, "no operation to check") {
		t.Errorf("exit %d, want 2, saying createRefund was skipped and no operation was checked\nstderr:\n%s", code, stderr)
	}
	var js struct {
		Passed  *bool             `json:"passed"`
		Targets []json.RawMessage `json:"targets"`
		Skipped []struct {
			Target string `json:"target"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(stdout), &js); err != nil {
		t.Fatalf("-json output does not parse: %v\n%q", err, stdout)
	}
	if js.Passed == nil || *js.Passed || js.Targets == nil || len(js.Targets) != 0 || len(js.Skipped) != 1 || js.Skipped[0].Target != "createRefund" {
		t.Errorf("-json: %s\nwant passed false, no target, createRefund skipped", stdout)
	}
	if n := junitTotals(t, raw); n.Tests != 1 || n.Skipped != 1 {
		t.Errorf("-junit: want one test, skipped:\n%s", raw)
	}
}

// TestOpenAPISplitDocumentSkipsPath: a split document's path item that
// is a $ref to another file skips the operations of that path, saying so
// once, naming the path and the ref, on stderr, in -json and in -junit;
// the other paths are checked. It failed the whole run.
func TestOpenAPISplitDocumentSkipsPath(t *testing.T) {
	mock := mockserver.New()
	defer mock.Close()
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {
		"/payments": {"post": {"operationId": "createPayment",
			"parameters": [{"name": "Idempotency-Key", "in": "header", "required": true}],
			"requestBody": {"required": true, "content": {"application/json": {"example": ` + payBody + `}}}}},
		"/refunds": {"$ref": "./paths/refunds.yaml"}}}`
	code, stdout, stderr, raw := checkWithReports(t, doc, "-url", mock.URL, "-concurrency", "4")
	const line = `saferetry check: skipping the operations of path /refunds: its path item's $ref "./paths/refunds.yaml" is external`
	if code != 0 || !strings.Contains(stderr, line) {
		t.Fatalf("exit %d, want 0 with /refunds skipped, saying %q\nstdout:\n%.600s\nstderr:\n%s", code, line, stdout, stderr)
	}
	var js struct {
		Targets []struct {
			Target string `json:"target"`
		} `json:"targets"`
		Skipped []struct {
			Target string `json:"target"`
			Reason string `json:"reason"`
		} `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(stdout), &js); err != nil {
		t.Fatalf("-json output does not parse: %v\n%s", err, stdout)
	}
	if len(js.Targets) != 1 || js.Targets[0].Target != "createPayment" || len(js.Skipped) != 1 ||
		js.Skipped[0].Target != "/refunds" || !strings.Contains(js.Skipped[0].Reason, `"./paths/refunds.yaml"`) {
		t.Errorf("-json: targets %+v, skipped %+v; want createPayment checked, /refunds skipped naming its $ref", js.Targets, js.Skipped)
	}
	if !strings.Contains(string(raw), `<testsuite name="/refunds"`) || !strings.Contains(string(raw), `./paths/refunds.yaml`) {
		t.Errorf("-junit: want a suite /refunds, skipped naming its $ref:\n%s", raw)
	}
}

// TestOpenAPISkippedMethodAndPath: a skipped operation in -json has its
// method and its path as the document writes it in fields of their own,
// beside its name, which is its operationId when it has one: a CI job
// matched them out of the name, or could not. One standing for a path
// item's operations has its path and no method.
func TestOpenAPISkippedMethodAndPath(t *testing.T) {
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {
		"/refunds/{id}": {"post": {"operationId": "createRefund",
			"parameters": [{"name": "Idempotency-Key", "in": "header"}, {"name": "id", "in": "path", "required": true}]}},
		"/transfers": {"$ref": "./paths/transfers.json"}}}`
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stdout, stderr := runCLI(t, "check", "-openapi", file, "-url", "http://127.0.0.1:1", "-json")
	var js struct {
		Skipped []map[string]string `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(stdout), &js); err != nil {
		t.Fatalf("-json output does not parse: %v\n%q\nstderr:\n%s", err, stdout, stderr)
	}
	want := []map[string]string{
		{"target": "createRefund", "method": "POST", "path": "/refunds/{id}", "reason": "path parameter id has no example"},
		{"target": "/transfers", "path": "/transfers", "reason": `its path item's $ref "./paths/transfers.json" is external: only $refs into the document itself ("#/...") are read`},
	}
	if !reflect.DeepEqual(js.Skipped, want) {
		t.Errorf("-json skipped:\n%v\nwant\n%v", js.Skipped, want)
	}
}

// checkWithReports writes the OpenAPI document doc to a file, runs
// saferetry check over it with args and -json and -junit, and returns the
// exit status, the output (the -json report), stderr and the -junit file.
func checkWithReports(t *testing.T, doc string, args ...string) (code int, stdout, stderr string, junit []byte) {
	t.Helper()
	dir := t.TempDir()
	file, report := filepath.Join(dir, "openapi.json"), filepath.Join(dir, "report.xml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI(t, append(append([]string{"check", "-openapi", file}, args...), "-json", "-junit", report)...)
	junit, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("-junit: %v", err)
	}
	return code, stdout, stderr, junit
}

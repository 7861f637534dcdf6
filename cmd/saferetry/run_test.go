package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	var ju struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
	}
	if err := xml.Unmarshal(raw, &ju); err != nil || ju.Errors != 1 || !strings.Contains(string(raw), "<error") {
		t.Errorf("-junit for a target that could not be reached (%v):\n%s", err, raw)
	}
}

package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestMethodFlagAnyCase: -method names the method in any case, as
// typed at a shell: "-method patch" sends PATCH.
func TestMethodFlagAnyCase(t *testing.T) {
	code, stdout, stderr := runCLI(t, "check", "-dry-run", "-url", "http://127.0.0.1:9/p", "-method", "patch", "-body", payBody)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	requests := regexp.MustCompile(`(?m)^ +[0-9]+× +\S+ +(\S+) http`).FindAllStringSubmatch(stdout, -1)
	if len(requests) == 0 {
		t.Fatalf("no request in the dry run:\n%s", stdout)
	}
	for _, r := range requests {
		if r[1] != "PATCH" {
			t.Errorf("a request sent as %q; want PATCH:\n%s", r[1], strings.TrimSpace(r[0]))
		}
	}
}

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

// TestMethodFlagNotAToken: a -method that is no RFC 9110 token is
// refused, named as typed, whatever upper-casing would make of it:
// "ıtem" (a dotless i) was upper-cased to ITEM, a token, and sent; "po
// st" was refused as "PO ST", which nobody typed.
func TestMethodFlagNotAToken(t *testing.T) {
	for _, method := range []string{"ıtem", "ſend", "po st"} {
		code, _, stderr := runCLI(t, "check", "-dry-run", "-url", "http://127.0.0.1:9/p", "-method", method, "-body", payBody)
		if want := `method "` + method + `": not an HTTP method`; code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("-method %q: exit %d, stderr:\n%s\nwant 2, saying %q", method, code, stderr, want)
		}
	}
}

// TestMethodFlagEmpty: an empty -method is the default, POST, and the dry
// run names the target by the method its requests are sent with: it
// printed the target as " http://..." with no method while its requests
// said POST.
func TestMethodFlagEmpty(t *testing.T) {
	code, stdout, stderr := runCLI(t, "check", "-dry-run", "-url", "http://127.0.0.1:9/p", "-method", "", "-body", payBody)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	if want := "dry run: POST http://127.0.0.1:9/p would get"; !strings.Contains(stdout, want) {
		t.Errorf("the dry run does not say %q:\n%s", want, stdout)
	}
	for _, r := range regexp.MustCompile(`(?m)^ +[0-9]+× +\S+ +(\S+) http`).FindAllStringSubmatch(stdout, -1) {
		if r[1] != "POST" {
			t.Errorf("a request sent as %q; want POST:\n%s", r[1], strings.TrimSpace(r[0]))
		}
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
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

// TestBadHeaderIsInvalid: a -header, -auth-a or -auth-b that no request
// can carry (a name that is not an RFC 9110 token, a value with a control
// character) is reported as invalid (exit 2) before anything is sent: not
// as an endpoint that cannot be reached, nor, for a principal's header, as
// a failed scope-isolation MUST of the API under test (exit 1) after the
// operation ran; and -dry-run refuses it too rather than plan requests
// that could not be sent.
func TestBadHeaderIsInvalid(t *testing.T) {
	mock := mockserver.New()
	defer mock.Close()
	for _, flags := range [][]string{
		{"-header", "Bad(Name): v"},
		{"-header", "X-Note: a\x01b"},
		{"-auth-a", "Authorization: a", "-auth-b", "Bad/Name: b"},
	} {
		args := append([]string{"check", "-url", mock.URL + "/payments", "-body", payBody}, flags...)
		code, stdout, stderr := runCLI(t, args...)
		if code != 2 || strings.Contains(stderr, "cannot reach it") || !strings.Contains(stderr, "invalid") {
			t.Errorf("%q: exit %d\nstdout:\n%.1500s\nstderr:\n%s\nwant exit 2 and the header reported as invalid", flags, code, stdout, stderr)
		}
		args = append([]string{"check", "-dry-run", "-url", "http://127.0.0.1:9/p", "-body", payBody}, flags...)
		code, _, stderr = runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, "invalid") {
			t.Errorf("-dry-run %q: exit %d, stderr %q; want 2 and invalid", flags, code, stderr)
		}
	}
	if n := len(mock.Payments()); n != 0 {
		t.Errorf("%d payments made; want none: a bad header is refused before anything is sent", n)
	}
}

// TestHugeConcurrencyIsInvalid: a burst too large for one machine to send
// (-concurrency 1099511627776: as many goroutines, connections and
// answers) is refused as invalid (exit 2) before anything is sent, by the
// run and by -dry-run alike, instead of crashing the command after the
// operation ran.
func TestHugeConcurrencyIsInvalid(t *testing.T) {
	mock := mockserver.New()
	defer mock.Close()
	for _, dry := range []bool{false, true} {
		args := []string{"check", "-url", mock.URL + "/payments", "-body", payBody, "-concurrency", "1099511627776"}
		if dry {
			args = append(args, "-dry-run")
		}
		code, stdout, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, "invalid") || !strings.Contains(stderr, "concurrency") {
			t.Errorf("dry run %v: exit %d\nstdout:\n%.300s\nstderr:\n%s\nwant exit 2 and the concurrency reported as invalid", dry, code, stdout, stderr)
		}
	}
	if n := len(mock.Payments()); n != 0 {
		t.Errorf("%d payments made; want none: the burst's size is refused before anything is sent", n)
	}
}

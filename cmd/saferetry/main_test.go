package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/mockserver"
)

const payBody = `{"amount":1250,"currency":"EUR","recipient":"alice"}`

// runCLI runs the command line and returns its exit status and outputs.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// forgetful answers every POST 201 with a new resource: it ignores keys.
func forgetful() *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strconv.FormatInt(n.Add(1), 10)
		w.Header().Set("Location", "/things/"+id)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"` + id + `"}`))
	}))
}

// closedURL is the URL of a port that refuses connections.
func closedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String() + "/payments"
	_ = ln.Close()
	return u
}

func TestExitStatus(t *testing.T) {
	mock := mockserver.New()
	defer mock.Close()
	bad := forgetful()
	defer bad.Close()
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte(payBody), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // a line the output must hold
		stderr string
	}{
		{"every MUST passes", []string{"check", "-url", mock.URL + "/payments", "-body", payBody, "-key-required"}, 0, "every MUST passed", ""},
		{"body from a file, stripe profile", []string{"check", "-url", mock.URL + "/payments", "-body-file", body, "-profile", "stripe"}, 0, "(profile stripe", ""},
		{"a MUST fails", []string{"check", "-url", bad.URL + "/things", "-body", payBody}, 1, "FAIL    MUST    replay", ""},
		{"unreachable", []string{"check", "-url", closedURL(t), "-body", payBody}, 2, "", "cannot reach it"},
		{"no command", nil, 2, "", "usage:"},
		{"unknown command", []string{"chekc"}, 2, "", `unknown command "chekc"`},
		{"no url", []string{"check"}, 2, "", "give -url"},
		{"bad url", []string{"check", "-url", "localhost:8080/payments"}, 2, "", "not an absolute http or https URL"},
		{"unknown flag", []string{"check", "-url", mock.URL, "-nope"}, 2, "", "flag provided but not defined"},
		{"two bodies", []string{"check", "-url", mock.URL, "-body", "{}", "-body-file", body}, 2, "", "not both"},
		{"bad profile", []string{"check", "-url", mock.URL, "-profile", "paypal"}, 2, "", "want ietf or stripe"},
		{"bad header", []string{"check", "-url", mock.URL, "-header", "no colon"}, 2, "", "want 'Name: value'"},
		{"one principal", []string{"check", "-url", mock.URL, "-auth-a", "Authorization: a"}, 2, "", "together"},
		{"count url without a count", []string{"check", "-url", mock.URL + "/payments", "-body", payBody, "-count-url", mock.URL + "/payments#/total"}, 2, "", "invalid: count url"},
		{"help", []string{"check", "-h"}, 0, "", "-count-url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, want %d\nstdout (want %q):\n%s\nstderr (want %q):\n%s", code, tc.code, tc.stdout, stdout, tc.stderr, stderr)
			}
			if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
				t.Errorf("stderr shows a stack trace:\n%s", stderr)
			}
		})
	}
}

// TestJSONAndJUnit: -json prints one JSON document and -junit writes a
// JUnit file, both of which parse.
func TestJSONAndJUnit(t *testing.T) {
	bad := forgetful()
	defer bad.Close()
	junit := filepath.Join(t.TempDir(), "report.xml")
	code, stdout, stderr := runCLI(t, "check", "-url", bad.URL+"/things", "-body", payBody, "-json", "-junit", junit, "-concurrency", "4")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr %s", code, stderr)
	}
	var doc struct {
		Passed  bool `json:"passed"`
		Targets []struct {
			Results []struct{ ID, Level, Status string }
		}
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("-json output does not parse: %v\n%s", err, stdout)
	}
	if doc.Passed || len(doc.Targets) != 1 {
		t.Fatalf("-json: passed %v, %d targets", doc.Passed, len(doc.Targets))
	}
	statuses := map[string]string{}
	for _, r := range doc.Targets[0].Results {
		statuses[r.ID] = r.Status
	}
	if statuses["replay"] != "FAIL" || statuses["concurrent-once"] != "FAIL" || statuses["first-request"] != "PASS" {
		t.Errorf("-json statuses %v", statuses)
	}

	raw, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var ju struct {
		Suites []struct {
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &ju); err != nil {
		t.Fatalf("-junit file does not parse: %v\n%s", err, raw)
	}
	fails := 0
	for _, s := range statuses {
		if s == "FAIL" {
			fails++
		}
	}
	if n := junitTotals(t, raw); n.Tests != len(statuses) || n.Failures != fails || len(ju.Suites) != 1 || len(ju.Suites[0].Cases) != len(statuses) {
		t.Errorf("-junit: %d tests, %d failures; want %d and %d", n.Tests, n.Failures, len(statuses), fails)
	}
}

// junitCounts are the counts of a JUnit report.
type junitCounts struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Skipped  int `xml:"skipped,attr"`
}

// junitTotals are the counts of the testsuites of the JUnit report raw,
// added up: the Ant JUnit schema has them there, not in testsuites.
func junitTotals(t *testing.T, raw []byte) junitCounts {
	t.Helper()
	var doc struct {
		Suites []junitCounts `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("-junit file does not parse: %v\n%s", err, raw)
	}
	var n junitCounts
	for _, s := range doc.Suites {
		n.Tests += s.Tests
		n.Failures += s.Failures
		n.Errors += s.Errors
		n.Skipped += s.Skipped
	}
	return n
}

// TestDryRun: -dry-run sends nothing and prints every request, each
// check's with a key of its own.
func TestDryRun(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	code, stdout, stderr := runCLI(t, "check", "-dry-run", "-url", srv.URL+"/p", "-body", payBody, "-key-required",
		"-count-url", srv.URL+"/p", "-ttl", "1h", "-auth-a", "Authorization: a", "-auth-b", "Authorization: b")
	if code != 0 || hits.Load() != 0 {
		t.Fatalf("exit %d, %d requests sent; want 0 and 0\n%s", code, hits.Load(), stderr)
	}
	keys := map[string]bool{}
	for _, m := range regexp.MustCompile(`Idempotency-Key: (\S+)`).FindAllStringSubmatch(stdout, -1) {
		keys[m[1]] = true
	}
	// first (also replay, reuse, ttl), the other body alone, malformed
	// (an sf-string unterminated, the first of two values; the empty one
	// shows none), long, burst, scope (a and b), principal b's alone
	if len(keys) != 8 {
		t.Errorf("%d distinct keys, want 8:\n%s", len(keys), stdout)
	}
	for _, want := range []string{"20× concurrent-once", "(no Idempotency-Key)", " as b ", "count before the first request"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dry run lacks %q:\n%s", want, stdout)
		}
	}
}

// TestOpenAPI: -openapi finds the operation that declares the key, in a
// file, and checks it at -url.
func TestOpenAPI(t *testing.T) {
	mock := mockserver.New()
	defer mock.Close()
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {"/payments": {
		"get": {"operationId": "listPayments"},
		"post": {"operationId": "createPayment",
			"parameters": [{"name": "Idempotency-Key", "in": "header", "required": true}],
			"requestBody": {"required": true, "content": {"application/json": {"example": ` + payBody + `}}}}}}}`
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "check", "-openapi", file, "-url", mock.URL)
	if code != 0 || !strings.Contains(stdout, "createPayment (profile ietf") || !strings.Contains(stdout, "PASS    SHOULD  missing-key") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "listPayments") {
		t.Error("checked an operation without the key")
	}
	code, _, stderr = runCLI(t, "check", "-openapi", file)
	if code != 2 || !strings.Contains(stderr, "names no server (servers), and was not read from a URL: give the base URL (-url)") {
		t.Errorf("without -url: exit %d, stderr %s", code, stderr)
	}

	// Over HTTP, with the server named in the document.
	withServer := strings.Replace(doc, `"paths"`, `"servers": [{"url": "`+mock.URL+`"}], "paths"`, 1)
	docSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(withServer))
	}))
	defer docSrv.Close()
	code, stdout, stderr = runCLI(t, "check", "-openapi", docSrv.URL+"/openapi.json", "-json")
	if code != 0 || !strings.Contains(stdout, `"url": "`+mock.URL+`/payments"`) {
		t.Errorf("-openapi over HTTP: exit %d\nstdout:\n%.600s\nstderr:\n%s", code, stdout, stderr)
	}
}

// startupLine hands over the URL of the mock server's startup line.
type startupLine chan string

var urlRE = regexp.MustCompile(`listening on (http://\S+)`)

func (c startupLine) Write(p []byte) (int, error) {
	if m := urlRE.FindSubmatch(p); m != nil {
		select {
		case c <- string(m[1]):
		default:
		}
	}
	return len(p), nil
}

// TestMockSubcommand: saferetry mock serves the mock server, which the
// checker passes, and stops when its context ends.
func TestMockSubcommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(startupLine, 1)
	var errOut bytes.Buffer // read once run returned
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"mock", "-addr", "127.0.0.1:0"}, out, &errOut) }()
	var base string
	select {
	case base = <-out:
	case code := <-done:
		t.Fatalf("mock exited %d before listening: %s", code, errOut.String())
	case <-time.After(10 * time.Second):
		t.Fatal("no startup line after 10s")
	}

	code, stdout, stderr := runCLI(t, "check", "-url", base+"/payments", "-body", payBody, "-key-required", "-count-url", base+"/payments")
	if code != 0 {
		t.Errorf("check against saferetry mock: exit %d\n%s\n%s", code, stdout, stderr)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("mock exited %d, want 0; stderr %s", code, errOut.String())
	}
	if code, _, stderr := runCLI(t, "mock", "-mode", "nope"); code != 2 || !strings.Contains(stderr, "-mode") {
		t.Errorf("mock -mode nope: exit %d, stderr %s", code, stderr)
	}
}

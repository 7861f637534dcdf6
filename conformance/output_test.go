package conformance_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/saferetry/saferetry/conformance"
)

// junitDoc is JUnit XML as a CI system reads it: the counts are the
// testsuites', as the Ant JUnit schema has them (junitCounts adds them
// up).
type junitDoc struct {
	XMLName xml.Name `xml:"testsuites"`
	Suites  []struct {
		Name string `xml:"name,attr"`
		junitCounts
		Cases []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Error *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// junitCounts are a testsuite's counts.
type junitCounts struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Skipped  int `xml:"skipped,attr"`
}

// totals are the counts of every testsuite of d, added up.
func (d junitDoc) totals() junitCounts {
	var n junitCounts
	for _, s := range d.Suites {
		n.Tests += s.Tests
		n.Failures += s.Failures
		n.Errors += s.Errors
		n.Skipped += s.Skipped
	}
	return n
}

// TestOutputs: the JSON and JUnit reports of a server without
// fingerprints parse, and say what the report says.
func TestOutputs(t *testing.T) {
	srv := newNaive(flaws{noFingerprint: true}, longRetention)
	defer srv.Close()
	c := fullChecker(srv.URL + "/items")
	c.TTL = 0
	rep := check(t, c, srv.URL+"/items")
	reports := []conformance.Report{rep}

	var js bytes.Buffer
	if err := conformance.WriteJSON(&js, reports); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Passed  bool                 `json:"passed"`
		Targets []conformance.Report `json:"targets"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatalf("JSON report does not parse: %v\n%s", err, js.String())
	}
	if doc.Passed || len(doc.Targets) != 1 || len(doc.Targets[0].Results) != len(conformance.Checks()) {
		t.Fatalf("JSON report: passed %v, %d targets, want false and 1 with every check", doc.Passed, len(doc.Targets))
	}
	reuse, _ := doc.Targets[0].Result(conformance.CheckReuseRefused)
	if reuse.Status != conformance.Fail || reuse.Level != conformance.LevelMust || len(reuse.Evidence) != 2 ||
		reuse.Evidence[1].Status != 201 || reuse.Evidence[1].Key == "" || reuse.Evidence[1].Header["Idempotent-Replayed"] != "true" {
		t.Errorf("JSON reuse-refused: %+v", reuse)
	}
	if strings.Contains(js.String(), "Bearer alice") {
		t.Error("the JSON report shows a principal's header value")
	}

	var xb bytes.Buffer
	if err := conformance.WriteJUnit(&xb, reports); err != nil {
		t.Fatal(err)
	}
	var ju junitDoc
	if err := xml.Unmarshal(xb.Bytes(), &ju); err != nil {
		t.Fatalf("JUnit report does not parse: %v\n%s", err, xb.String())
	}
	if n := ju.totals(); n.Tests != len(conformance.Checks()) || n.Failures != 2 || n.Skipped != 1 || len(ju.Suites) != 1 {
		t.Fatalf("JUnit: %d tests, %d failures, %d skipped, %d suites; want %d, 2, 1, 1",
			n.Tests, n.Failures, n.Skipped, len(ju.Suites), len(conformance.Checks()))
	}
	failed := map[string]string{}
	for _, c := range ju.Suites[0].Cases {
		if c.Failure != nil {
			failed[c.Name] = c.Failure.Type
			if c.Failure.Message == "" || !strings.Contains(c.Failure.Text, "-> 201") {
				t.Errorf("JUnit failure of %s: %+v, want the verdict and the evidence", c.Name, c.Failure)
			}
		}
	}
	if failed["reuse-refused (MUST)"] != "MUST" || failed["reuse-status (SHOULD)"] != "SHOULD" {
		t.Errorf("JUnit failures %v, want reuse-refused (MUST) and reuse-status (SHOULD)", failed)
	}

	var txt strings.Builder
	if err := conformance.WriteText(&txt, reports); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FAIL    MUST    reuse-refused", "1 MUST failed", "FAIL reuse-refused:"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, txt.String())
		}
	}
}

// TestOutputsRecordTargetErrors: a target that could not be checked is
// no pass: the JSON report lists it under "errors" with passed false, and
// the JUnit report has a test case in error for it.
func TestOutputsRecordTargetErrors(t *testing.T) {
	unreachable := &conformance.Error{Target: "POST http://127.0.0.1:9/p", Cause: conformance.ErrUnreachable, Err: errors.New("connection refused")}

	var js bytes.Buffer
	if err := conformance.WriteJSON(&js, nil, unreachable); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Passed bool `json:"passed"`
		Errors []struct {
			Target string `json:"target"`
			Error  string `json:"error"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatalf("JSON report does not parse: %v\n%s", err, js.String())
	}
	if doc.Passed || len(doc.Errors) != 1 || doc.Errors[0].Target != unreachable.Target || !strings.Contains(doc.Errors[0].Error, "connection refused") {
		t.Errorf("JSON report of an unreachable target:\n%s", js.String())
	}

	var xb bytes.Buffer
	if err := conformance.WriteJUnit(&xb, nil, unreachable); err != nil {
		t.Fatal(err)
	}
	var ju junitDoc
	if err := xml.Unmarshal(xb.Bytes(), &ju); err != nil {
		t.Fatalf("JUnit report does not parse: %v\n%s", err, xb.String())
	}
	if n := ju.totals(); n.Tests != 1 || n.Errors != 1 || len(ju.Suites) != 1 || ju.Suites[0].Name != unreachable.Target ||
		len(ju.Suites[0].Cases) != 1 || ju.Suites[0].Cases[0].Error == nil || ju.Suites[0].Cases[0].Error.Type != "unreachable" {
		t.Errorf("JUnit report of an unreachable target:\n%s", xb.String())
	}
}

// TestOutputsRecordSkippedTargets: a target skipped on purpose (an
// *Error whose Cause is ErrSkipped) is listed under "skipped" with its
// reason, and is a skipped test case in JUnit: neither an error nor a
// failure, so passed stays true beside a target checked (and is false
// when every target was skipped: nothing checked is not passed).
func TestOutputsRecordSkippedTargets(t *testing.T) {
	skipped := &conformance.Error{Target: "createRefund", Cause: conformance.ErrSkipped, Err: errors.New("path parameter id has no example")}

	var none bytes.Buffer
	if err := conformance.WriteJSON(&none, nil, skipped); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(none.String(), `"passed": false`) {
		t.Errorf("JSON report of only a skipped target:\n%s\nwant passed false", none.String())
	}

	var js bytes.Buffer
	if err := conformance.WriteJSON(&js, []conformance.Report{{Target: "createPayment"}}, skipped); err != nil {
		t.Fatal(err)
	}
	if got, want := js.String(), `"skipped": [
    {
      "target": "createRefund",
      "reason": "path parameter id has no example"
    }
  ]`; !strings.Contains(got, want) || !strings.Contains(got, `"passed": true`) || strings.Contains(got, `"errors"`) {
		t.Errorf("JSON report of a skipped target:\n%s\nwant passed true, no errors, and\n%s", got, want)
	}
	op := &conformance.Error{Target: "createRefund", Cause: conformance.ErrSkipped, Err: errors.New("path parameter id has no example"),
		Method: "POST", Path: "/refunds/{id}"}
	js.Reset()
	if err := conformance.WriteJSON(&js, nil, op); err != nil {
		t.Fatal(err)
	}
	if got, want := js.String(), `{
      "target": "createRefund",
      "method": "POST",
      "path": "/refunds/{id}",
      "reason": "path parameter id has no example"
    }`; !strings.Contains(got, want) {
		t.Errorf("JSON report of a skipped operation:\n%s\nwant\n%s", got, want)
	}

	var xb bytes.Buffer
	if err := conformance.WriteJUnit(&xb, nil, skipped); err != nil {
		t.Fatal(err)
	}
	var ju junitDoc
	if err := xml.Unmarshal(xb.Bytes(), &ju); err != nil {
		t.Fatalf("JUnit report does not parse: %v\n%s", err, xb.String())
	}
	if n := ju.totals(); n.Tests != 1 || n.Skipped != 1 || n.Failures != 0 || len(ju.Suites) != 1 || ju.Suites[0].Name != "createRefund" ||
		len(ju.Suites[0].Cases) != 1 || ju.Suites[0].Cases[0].Skipped == nil ||
		ju.Suites[0].Cases[0].Skipped.Message != "path parameter id has no example" || strings.Contains(xb.String(), "<error") {
		t.Errorf("JUnit report of a skipped target:\n%s", xb.String())
	}
}

// TestWriteTextPrintable: the text report is valid UTF-8 and holds no
// control character of a server's answer. An evidence body cut to fit a
// line is cut at a character boundary (it was cut at byte 100, inside a
// "€"), and newlines and escape sequences in it, or in a verdict, are
// escaped rather than sent to the terminal.
func TestWriteTextPrintable(t *testing.T) {
	rep := conformance.Report{Target: "POST http://h/p", URL: "http://h/p", Results: []conformance.Result{{
		ID: conformance.CheckReplay, Level: conformance.LevelMust, Status: conformance.Fail, Verdict: "Location \x1b]0;owned\x07",
		Evidence: []conformance.Exchange{
			{Method: "POST", URL: "http://h/p", Status: 201, Body: strings.Repeat("€", 60)}, // 180 bytes, as excerpt leaves it
			{Method: "POST", URL: "http://h/p", Status: 201, Body: "{\n  \"id\": \"\x1b[2J\"\n}"},
		},
	}}}
	var b strings.Builder
	if err := conformance.WriteText(&b, []conformance.Report{rep}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !utf8.ValidString(out) {
		t.Errorf("WriteText wrote invalid UTF-8:\n%q", out)
	}
	if strings.ContainsAny(out, "\x1b\x07\r\t") {
		t.Errorf("WriteText wrote a control character of the answer:\n%q", out)
	}
	if !strings.Contains(out, `{\n  "id": "\x1b[2J"\n}`) || !strings.Contains(out, `Location \x1b]0;owned\a`) {
		t.Errorf("WriteText does not show the escaped body and verdict:\n%s", out)
	}
}

package conformance_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
)

// junitTimes is what the Ant JUnit schema requires of suites and test
// cases beside their counts.
type junitTimes struct {
	Suites []struct {
		Name      string           `xml:"name,attr"`
		Timestamp string           `xml:"timestamp,attr"`
		Hostname  string           `xml:"hostname,attr"`
		Time      string           `xml:"time,attr"`
		Cases     []junitTimedCase `xml:"testcase"`
	} `xml:"testsuite"`
}

// junitTimedCase is a test case's name and time.
type junitTimedCase struct {
	Name string  `xml:"name,attr"`
	Time *string `xml:"time,attr"`
}

// antTimestamp is the Ant schema's ISO8601_DATETIME_PATTERN: no
// fraction, no zone.
var antTimestamp = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}$`)

// TestWriteJUnitTimes: every test case has a time, its check's exchanges'
// measured time, and every suite a timestamp (when its checks started,
// as the Ant schema writes it) and a hostname, which a strict JUnit schema
// requires: they had none, and a validating CI step refused the file.
// The suites of a target that could not be checked, or was skipped,
// have them too, their cases taking no time.
func TestWriteJUnitTimes(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	started := time.Date(2026, 3, 1, 12, 30, 45, 500, time.Local)
	rep := conformance.Report{Target: "pay", URL: "http://h/p", Started: started, Elapsed: conformance.Duration(2 * time.Second),
		Results: []conformance.Result{
			{ID: conformance.CheckReplay, Level: conformance.LevelMust, Status: conformance.Pass, Evidence: []conformance.Exchange{
				{Method: "POST", URL: "http://h/p", Status: 201, Elapsed: conformance.Duration(1500 * time.Millisecond)},
				{Method: "POST", URL: "http://h/p", Status: 201, Elapsed: conformance.Duration(250 * time.Millisecond)},
			}},
			{ID: conformance.CheckMissingKey, Level: conformance.LevelShould, Status: conformance.Skip},
		}}
	unreachable := &conformance.Error{Target: "gone", Cause: conformance.ErrUnreachable, Err: errors.New("connection refused")}
	skipped := &conformance.Error{Target: "refund", Cause: conformance.ErrSkipped, Err: errors.New("path parameter id has no example")}
	var b bytes.Buffer
	if err := conformance.WriteJUnit(&b, []conformance.Report{rep}, unreachable, skipped); err != nil {
		t.Fatal(err)
	}
	var ju junitTimes
	if err := xml.Unmarshal(b.Bytes(), &ju); err != nil || len(ju.Suites) != 3 {
		t.Fatalf("JUnit report (%v), want 3 suites:\n%s", err, b.String())
	}
	for _, s := range ju.Suites {
		if !antTimestamp.MatchString(s.Timestamp) || s.Hostname != host {
			t.Errorf("suite %s: timestamp %q, hostname %q; want one as the Ant schema writes it, and %q", s.Name, s.Timestamp, s.Hostname, host)
		}
		for _, c := range s.Cases {
			if c.Time == nil {
				t.Errorf("suite %s, case %s: no time", s.Name, c.Name)
			}
		}
	}
	pay := ju.Suites[0]
	if pay.Timestamp != "2026-03-01T12:30:45" || pay.Time != "2.000" {
		t.Errorf("suite pay: timestamp %q, time %q; want 2026-03-01T12:30:45 (when it started) and 2.000", pay.Timestamp, pay.Time)
	}
	if got := caseTimes(pay.Cases); got != "1.750 0.000" {
		t.Errorf("suite pay: case times %q; want 1.750 (its exchanges') and 0.000 (none)", got)
	}
	for _, s := range ju.Suites[1:] {
		if got := caseTimes(s.Cases); got != "0.000" {
			t.Errorf("suite %s: case times %q; want 0.000", s.Name, got)
		}
	}
}

// caseTimes are the cases' times, "none" for one without.
func caseTimes(cases []junitTimedCase) string {
	var out []string
	for _, c := range cases {
		if c.Time == nil {
			out = append(out, "none")
			continue
		}
		out = append(out, *c.Time)
	}
	return strings.Join(out, " ")
}

// TestRunReportStarted: Run's Report says when its checks started, which
// the JUnit suite's timestamp is.
func TestRunReportStarted(t *testing.T) {
	srv := newNaive(flaws{}, longRetention)
	defer srv.Close()
	before := time.Now()
	rep := check(t, fullChecker(srv.URL+"/items"), srv.URL+"/items")
	if rep.Started.Before(before) || rep.Started.After(time.Now()) {
		t.Errorf("Started %v; want it within the run, from %v", rep.Started, before)
	}
}

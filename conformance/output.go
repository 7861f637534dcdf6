package conformance

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// Passed reports whether every MUST check of every report passed.
func Passed(reports []Report) bool {
	for _, r := range reports {
		if !r.Passed() {
			return false
		}
	}
	return true
}

// shownEvidence is how many exchanges the text output shows under a
// check that failed or warned.
const shownEvidence = 4

// WriteText writes reports as tables for people: one row per check with
// its status, level and verdict, and under a FAIL or WARN the first
// exchanges of its evidence, each on one line with the first 100 bytes of
// its body. What it writes is valid UTF-8 without control characters:
// those of an answer (a newline, an escape sequence) are written as Go
// escapes ("\n", "\x1b"), and bodies are cut between characters.
func WriteText(w io.Writer, reports []Report) error {
	ew := &errWriter{w: w}
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(ew)
		}
		fmt.Fprintf(ew, "%s (profile %s, %v)\n\n", printable(r.Target), r.Profile, time.Duration(r.Elapsed).Round(time.Millisecond))
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "STATUS\tLEVEL\tCHECK\tVERDICT")
		for _, res := range r.Results {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Status, res.Level, res.ID, printable(res.Verdict))
		}
		_ = tw.Flush()
		for _, res := range r.Results {
			if res.Status != Fail && res.Status != Warn || len(res.Evidence) == 0 {
				continue
			}
			fmt.Fprintf(ew, "\n%s %s:\n", res.Status, res.ID)
			for j, ex := range res.Evidence {
				if j == shownEvidence {
					fmt.Fprintf(ew, "  ... %d more exchanges (-json shows them all)\n", len(res.Evidence)-j)
					break
				}
				fmt.Fprintf(ew, "  %s\n", ex.line(r.URL))
			}
		}
		fmt.Fprintf(ew, "\n%s\n", summary(r))
	}
	return ew.err
}

// summary is a report's last line.
func summary(r Report) string {
	n := map[Status]int{}
	mustFailed := 0
	for _, res := range r.Results {
		n[res.Status]++
		if res.Status == Fail && res.Level == LevelMust {
			mustFailed++
		}
	}
	verdict := "every MUST passed"
	if mustFailed > 0 {
		verdict = fmt.Sprintf("%d MUST failed", mustFailed)
	}
	return fmt.Sprintf("%d checks: %d PASS, %d FAIL, %d WARN, %d SKIP; %s.", len(r.Results), n[Pass], n[Fail], n[Warn], n[Skip], verdict)
}

// lineBodyLen is how much of an answer's body a line shows.
const lineBodyLen = 100

// line is ex on one line, printable, its URL shown relative to base when
// they share an origin.
func (ex Exchange) line(base string) string {
	var b strings.Builder
	b.WriteString(ex.Method + " " + shortURL(ex.URL, base))
	if ex.Principal != "" {
		b.WriteString(" as " + ex.Principal)
	}
	if ex.Key != "" {
		b.WriteString(" key=" + ex.Key)
	}
	b.WriteString(" -> ")
	if ex.Status == 0 {
		b.WriteString("no answer: " + ex.Error)
		return printable(b.String())
	}
	fmt.Fprintf(&b, "%d", ex.Status)
	for _, name := range shownHeaders {
		if v, ok := ex.Header[name]; ok && name != "Content-Type" {
			b.WriteString(" " + name + ": " + v)
		}
	}
	if ct := ex.Header["Content-Type"]; ct != "" {
		b.WriteString(" [" + ct + "]")
	}
	if body := strings.TrimSpace(ex.Body); body != "" {
		b.WriteString(" " + excerptN([]byte(body), lineBodyLen))
	}
	return printable(b.String())
}

func shortURL(u, base string) string {
	pu, err1 := url.Parse(u)
	pb, err2 := url.Parse(base)
	if err1 != nil || err2 != nil || pu.Scheme != pb.Scheme || pu.Host != pb.Host {
		return u
	}
	return pu.RequestURI()
}

// jsonDocument is what WriteJSON writes.
type jsonDocument struct {
	Passed  bool            `json:"passed"`
	Targets []Report        `json:"targets"`
	Errors  []targetError   `json:"errors,omitempty"`
	Skipped []skippedTarget `json:"skipped,omitempty"`
}

// skippedTarget is a target left unchecked on purpose (ErrSkipped), in
// the JSON report.
type skippedTarget struct {
	Target  string `json:"target"`
	Method  string `json:"method,omitempty"`
	Path    string `json:"path,omitempty"`
	Webhook string `json:"webhook,omitempty"`
	Reason  string `json:"reason"`
}

// targetError is a target that could not be checked, in the JSON and
// JUnit reports.
type targetError struct {
	Target string `json:"target"`
	Error  string `json:"error"`
	kind   string // "unreachable", "invalid", "interrupted" or "error"
	method string // a skipped Operation's, as its Error has it
	path   string
	hook   string
}

// targetErrors describes errs, Run's errors: an *Error's Target and the
// rest of its message. Those whose cause is ErrSkipped are in skipped,
// their Error only why, and not in failed.
func targetErrors(errs []error) (failed, skipped []targetError) {
	for _, err := range errs {
		te := targetError{Error: err.Error(), kind: "error"}
		var ce *Error
		if errors.As(err, &ce) {
			te.Target, te.Error = ce.Target, ce.Cause.Error()
			te.method, te.path, te.hook = ce.Method, ce.Path, ce.Webhook
			if ce.Err != nil {
				te.Error += ": " + ce.Err.Error()
			}
		}
		switch {
		case ce != nil && errors.Is(ce.Cause, ErrSkipped):
			te.Error = "skipped"
			if ce.Err != nil {
				te.Error = ce.Err.Error()
			}
			skipped = append(skipped, te)
			continue
		case errors.Is(err, ErrUnreachable):
			te.kind = "unreachable"
		case errors.Is(err, ErrInvalid):
			te.kind = "invalid"
		case errors.Is(err, ErrInterrupted):
			te.kind = "interrupted"
		}
		failed = append(failed, te)
	}
	return failed, skipped
}

// WriteJSON writes reports as one JSON document: {"passed": bool,
// "targets": [Report, ...], "errors": [{"target": name, "error":
// message}, ...], "skipped": [{"target": name, "method": method,
// "path": path, "webhook": name, "reason": why}, ...]}. errs are the
// errors of the targets that could not be checked (Run's, each an
// *Error naming its target), and of those skipped on purpose (an *Error
// whose Cause is ErrSkipped, its Err the reason, its Method, Path and
// Webhook the skipped operation's, each left out when ""); "errors" and
// "skipped" are left
// out when empty. passed is Passed(reports) with no
// error: a skipped target does not make it false, unless every target
// was skipped (no report): nothing checked is not passed.
func WriteJSON(w io.Writer, reports []Report, errs ...error) error {
	if reports == nil {
		reports = []Report{}
	}
	failed, skipped := targetErrors(errs)
	allSkipped := len(reports) == 0 && len(failed) == 0 && len(skipped) > 0
	doc := jsonDocument{Passed: Passed(reports) && len(failed) == 0 && !allSkipped, Targets: reports, Errors: failed}
	for _, te := range skipped {
		doc.Skipped = append(doc.Skipped, skippedTarget{Target: te.Target, Method: te.method, Path: te.path, Webhook: te.hook, Reason: te.Error})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

// JUnit XML, as CI systems read it: a suite per target, a test case per
// check, in the element structure and with the attributes of the strict
// Ant JUnit schema (which Jenkins' also allows).
type (
	junitSuites struct {
		XMLName xml.Name     `xml:"testsuites"` // without attributes: the Ant schema declares none
		Suites  []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name       string          `xml:"name,attr"`
		Package    string          `xml:"package,attr"`
		ID         int             `xml:"id,attr"`
		Tests      int             `xml:"tests,attr"`
		Failures   int             `xml:"failures,attr"`
		Errors     int             `xml:"errors,attr"`
		Skipped    int             `xml:"skipped,attr"`
		Time       string          `xml:"time,attr"`
		Timestamp  string          `xml:"timestamp,attr"`
		Hostname   string          `xml:"hostname,attr"`
		Properties junitProperties `xml:"properties"`
		Cases      []junitCase     `xml:"testcase"`
		SystemOut  string          `xml:"system-out"`
		SystemErr  string          `xml:"system-err"`
	}
	// junitProperties are none: the schema requires the element.
	junitProperties struct{}
	junitCase       struct {
		Name      string        `xml:"name,attr"`
		Classname string        `xml:"classname,attr"`
		Time      string        `xml:"time,attr"`
		Failure   *junitFailure `xml:"failure,omitempty"`
		Error     *junitFailure `xml:"error,omitempty"`
		Skipped   *junitSkipped `xml:"skipped,omitempty"`
	}
	junitFailure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
	junitSkipped struct {
		Message string `xml:"message,attr"`
	}
)

// junitPackage is the package attribute of every suite.
const junitPackage = "saferetry.check"

// junitUnnamed is the name of a suite whose target has none.
const junitUnnamed = "(unnamed)"

// junitName is name as a suite's name, which the Ant schema makes a
// token of at least one character once its XML whitespace collapses:
// junitUnnamed for a name of XML whitespace only, or none.
func junitName(name string) string {
	if strings.Trim(name, " \t\r\n") == "" {
		return junitUnnamed
	}
	return name
}

// WriteJUnit writes reports as JUnit XML: a testsuite per target, a
// testcase per check named "id (LEVEL)". A FAIL is a failure, whatever
// its level (the type attribute holds the level), with the evidence as its
// text; a SKIP is skipped; a PASS or WARN passes. The suite's system-out
// holds a line per check, "STATUS LEVEL id: verdict". errs are the errors
// of the targets that could not be checked (Run's, each an *Error naming
// its target): each is a testsuite of one testcase, "run", with an error
// whose type is "unreachable", "invalid", "interrupted" or "error"; one
// whose Cause is ErrSkipped is such a testsuite whose testcase is
// skipped, its message the reason.
//
// It is valid against the strict Ant JUnit schema (and so against
// Jenkins'): testsuites has no attributes, the counts are each
// testsuite's; a testsuite has a name ("(unnamed)" for a target of
// none, or of whitespace only), package "saferetry.check", an id (0 for
// the first, then one more for each), properties (none), system-out and
// system-err, the time its checks took, a timestamp (the Report's
// Started, in local time without a zone; the time of writing for one
// without, and for a target not checked) and the hostname of the machine
// writing it; a testcase has the time its check's exchanges took, from
// the first sent to the last answered (0.000 for a target not checked),
// and at most one of failure, error and skipped.
func WriteJUnit(w io.Writer, reports []Report, errs ...error) error {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost" // as Ant writes it then
	}
	return writeJUnit(w, time.Now(), host, reports, errs)
}

// junitTimestamp is the layout of a suite's timestamp in the Ant JUnit
// schema (its ISO8601_DATETIME_PATTERN): local time, without a fraction
// or a zone, as Ant writes it.
const junitTimestamp = "2006-01-02T15:04:05"

// junitSeconds is d as a time attribute: seconds, to the millisecond.
func junitSeconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// writeJUnit is WriteJUnit at now, on host.
func writeJUnit(w io.Writer, now time.Time, host string, reports []Report, errs []error) error {
	var doc junitSuites
	for _, r := range reports {
		started := r.Started
		if started.IsZero() { // a Report not made by Run: it was written now
			started = now
		}
		s := junitSuite{Name: r.Target, Time: junitSeconds(time.Duration(r.Elapsed)),
			Timestamp: started.Local().Format(junitTimestamp), Hostname: host}
		var out strings.Builder
		for _, res := range r.Results {
			c := junitCase{Name: fmt.Sprintf("%s (%s)", res.ID, res.Level), Classname: junitPackage + "." + string(r.Profile),
				Time: junitSeconds(evidenceTime(res.Evidence))}
			switch res.Status {
			case Fail:
				var ev strings.Builder
				for _, ex := range res.Evidence {
					ev.WriteString(ex.line(r.URL) + "\n")
				}
				c.Failure = &junitFailure{Message: res.Verdict, Type: string(res.Level), Text: ev.String()}
				s.Failures++
			case Skip:
				c.Skipped = &junitSkipped{Message: res.Verdict}
				s.Skipped++
			}
			fmt.Fprintf(&out, "%s %s %s: %s\n", res.Status, res.Level, res.ID, res.Verdict)
			s.Cases = append(s.Cases, c)
			s.Tests++
		}
		s.SystemOut = out.String()
		doc.Suites = append(doc.Suites, s)
	}
	failed, skipped := targetErrors(errs)
	// Their times are unknown: they took none that counts.
	stamp := now.Local().Format(junitTimestamp)
	for _, te := range failed {
		doc.Suites = append(doc.Suites, junitSuite{Name: te.Target, Tests: 1, Errors: 1, Time: "0.000", Timestamp: stamp, Hostname: host, Cases: []junitCase{{
			Name: "run", Classname: junitPackage, Time: "0.000", Error: &junitFailure{Message: te.Error, Type: te.kind},
		}}})
	}
	for _, te := range skipped {
		doc.Suites = append(doc.Suites, junitSuite{Name: te.Target, Tests: 1, Skipped: 1, Time: "0.000", Timestamp: stamp, Hostname: host, Cases: []junitCase{{
			Name: "run", Classname: junitPackage, Time: "0.000", Skipped: &junitSkipped{Message: te.Error},
		}}})
	}
	for i := range doc.Suites {
		doc.Suites[i].Package, doc.Suites[i].ID = junitPackage, i
		doc.Suites[i].Name = junitName(doc.Suites[i].Name)
	}
	ew := &errWriter{w: w}
	_, _ = io.WriteString(ew, xml.Header)
	enc := xml.NewEncoder(ew)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, _ = io.WriteString(ew, "\n")
	return ew.err
}

// errWriter keeps the first write error, so that a run of Fprintf calls
// is checked once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

package conformance_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
)

// xmlNode is an element of a decoded XML document: its name, its
// attributes, its child elements and its text.
type xmlNode struct {
	name  string
	attrs map[string]string
	kids  []*xmlNode
	text  string
}

// decodeXML is the element tree of doc.
func decodeXML(doc []byte) (*xmlNode, error) {
	d := xml.NewDecoder(bytes.NewReader(doc))
	var stack []*xmlNode
	var root *xmlNode
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &xmlNode{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			if len(stack) == 0 {
				root = n
			} else {
				parent := stack[len(stack)-1]
				parent.kids = append(parent.kids, n)
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(tok)
			}
		}
	}
	if root == nil {
		return nil, errors.New("no element")
	}
	return root, nil
}

var (
	xsdInt     = regexp.MustCompile(`^[+-]?[0-9]+$`)
	xsdDecimal = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$`)
)

// junitSchemaErrors are the ways the JUnit document doc breaks what both
// the Ant JUnit schema (windyroad's JUnit.xsd, the strict one, in its
// version with skipped) and Jenkins' (xunit's junit-10.xsd) require: the
// rules of both, as element structure, attributes and their types. The
// Ant schema declares no attribute of testsuites; each testsuite in it
// has package and id (0, 1, ...) beside the attributes of a lone
// testsuite, and holds properties, its test cases, system-out and
// system-err, in that order; a test case holds at most one of skipped,
// error and failure, and nothing else.
func junitSchemaErrors(doc []byte) []string {
	root, err := decodeXML(doc)
	if err != nil {
		return []string{"does not parse: " + err.Error()}
	}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	// attrs checks n's attributes: each in allowed, each of required
	// present, each value of its type.
	attrs := func(where string, n *xmlNode, allowed map[string]*regexp.Regexp, required ...string) {
		for name, v := range n.attrs {
			typ, ok := allowed[name]
			switch {
			case !ok:
				bad("%s: attribute %s is not in the schemas", where, name)
			case typ != nil && !typ.MatchString(v):
				bad("%s: attribute %s=%q is not of its type (%s)", where, name, v, typ)
			}
		}
		for _, name := range required {
			if _, ok := n.attrs[name]; !ok {
				bad("%s: no attribute %s, which is required", where, name)
			}
		}
	}
	if root.name != "testsuites" {
		return []string{"root element " + root.name + ", want testsuites"}
	}
	attrs("testsuites", root, nil)
	nonEmpty := regexp.MustCompile(`\S`)
	for i, s := range root.kids {
		where := fmt.Sprintf("testsuite %d (%s)", i, s.attrs["name"])
		if s.name != "testsuite" {
			bad("testsuites holds %s, want only testsuite", s.name)
			continue
		}
		attrs(where, s, map[string]*regexp.Regexp{
			"name": nonEmpty, "timestamp": antTimestamp, "hostname": nonEmpty,
			"tests": xsdInt, "failures": xsdInt, "errors": xsdInt, "skipped": xsdInt, "time": xsdDecimal,
			"package": nil, "id": xsdInt,
		}, "name", "timestamp", "hostname", "tests", "failures", "errors", "time", "package", "id")
		if id := s.attrs["id"]; id != "" && id != strconv.Itoa(i) {
			bad("%s: id %s, want %d (0 for the first, then one more for each)", where, id, i)
		}
		var names []string
		for _, k := range s.kids {
			names = append(names, k.name)
		}
		seq := strings.Join(names, " ")
		if want := regexp.MustCompile(`^properties( testcase)* system-out system-err$`); !want.MatchString(seq) {
			bad("%s: holds %q, want properties, the test cases, system-out, system-err", where, seq)
		}
		var tests, failures, errors, skipped int
		for _, k := range s.kids {
			switch k.name {
			case "properties":
				for _, p := range k.kids {
					if p.name != "property" {
						bad("%s: properties holds %s", where, p.name)
					}
					attrs(where+" property", p, map[string]*regexp.Regexp{"name": nonEmpty, "value": nil}, "name", "value")
				}
			case "system-out", "system-err":
				attrs(where+" "+k.name, k, nil)
				if len(k.kids) > 0 {
					bad("%s: %s holds elements", where, k.name)
				}
			case "testcase":
				tests++
				cw := where + " testcase " + k.attrs["name"]
				attrs(cw, k, map[string]*regexp.Regexp{"name": nonEmpty, "classname": nonEmpty, "time": xsdDecimal}, "name", "classname", "time")
				if len(k.kids) > 1 {
					bad("%s: holds %d elements, want at most one of skipped, error and failure", cw, len(k.kids))
				}
				for _, o := range k.kids {
					switch o.name {
					case "failure":
						failures++
						attrs(cw+" failure", o, map[string]*regexp.Regexp{"message": nil, "type": nil}, "type")
					case "error":
						errors++
						attrs(cw+" error", o, map[string]*regexp.Regexp{"message": nil, "type": nil}, "type")
					case "skipped":
						skipped++
						attrs(cw+" skipped", o, map[string]*regexp.Regexp{"message": nil, "type": nil})
					default:
						bad("%s: holds %s, which the Ant schema does not allow in a test case", cw, o.name)
					}
					if len(o.kids) > 0 {
						bad("%s: %s holds elements", cw, o.name)
					}
				}
			}
		}
		for name, n := range map[string]int{"tests": tests, "failures": failures, "errors": errors, "skipped": skipped} {
			if v, ok := s.attrs[name]; ok && v != strconv.Itoa(n) {
				bad("%s: %s=%s, but it holds %d", where, name, v, n)
			}
		}
	}
	slices.Sort(errs)
	return errs
}

// TestWriteJUnitSchema: the JUnit report is valid against the strict
// Ant JUnit schema and Jenkins' alike, for suites of checks that passed,
// warned, failed and were skipped, and those of a target that could not
// be checked or was skipped. testsuites had attributes (skipped among
// them, which neither schema declares), no testsuite had package, id,
// properties, system-out or system-err, and a passing case held
// system-out: a validating CI step refused the file.
func TestWriteJUnitSchema(t *testing.T) {
	rep := conformance.Report{Target: "pay", URL: "http://h/p", Profile: conformance.ProfileIETF,
		Started: time.Date(2026, 3, 1, 12, 30, 45, 0, time.Local), Elapsed: conformance.Duration(time.Second),
		Results: []conformance.Result{
			{ID: conformance.CheckReplay, Level: conformance.LevelMust, Status: conformance.Pass, Verdict: "the same answer"},
			{ID: conformance.CheckReuseRefused, Level: conformance.LevelMust, Status: conformance.Fail, Verdict: "201 <&>",
				Evidence: []conformance.Exchange{{Method: "POST", URL: "http://h/p", Status: 201, Body: `{"id":"1"}`}}},
			{ID: conformance.CheckProblemJSON, Level: conformance.LevelInfo, Status: conformance.Warn, Verdict: "text/plain"},
			{ID: conformance.CheckTTLExpiry, Level: conformance.LevelShould, Status: conformance.Skip, Verdict: "no -ttl"},
		}}
	unreachable := &conformance.Error{Target: "gone", Cause: conformance.ErrUnreachable, Err: errors.New("connection refused")}
	skipped := &conformance.Error{Target: "refund", Cause: conformance.ErrSkipped, Err: errors.New("path parameter id has no example")}
	for _, tc := range []struct {
		name    string
		reports []conformance.Report
		errs    []error
	}{
		{"checked", []conformance.Report{rep, rep}, nil},
		{"not checked", nil, []error{unreachable, skipped}},
		{"both", []conformance.Report{rep}, []error{unreachable, skipped}},
		{"none", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := conformance.WriteJUnit(&b, tc.reports, tc.errs...); err != nil {
				t.Fatal(err)
			}
			if errs := junitSchemaErrors(b.Bytes()); len(errs) > 0 {
				t.Errorf("the JUnit report breaks the schemas:\n%s\n\n%s", strings.Join(errs, "\n"), b.String())
			}
		})
	}
}

// TestJUnitSchemaCheckFails: junitSchemaErrors finds what each schema
// refuses, so that TestWriteJUnitSchema can fail.
func TestJUnitSchemaCheckFails(t *testing.T) {
	const suite = `<testsuite name="a" timestamp="2026-03-01T12:30:45" hostname="h" tests="1" failures="0" errors="0" time="0.000" package="p" id="0">`
	for _, tc := range []struct{ doc, says string }{
		{`<testsuites tests="1">` + suite + `<properties/><testcase name="c" classname="k" time="0"/><system-out/><system-err/></testsuite></testsuites>`,
			"testsuites: attribute tests"},
		{`<testsuites>` + suite + `<testcase name="c" classname="k" time="0"/><system-out/><system-err/></testsuite></testsuites>`,
			"want properties"},
		{`<testsuites>` + suite + `<properties/><testcase name="c" classname="k" time="0"><system-out>x</system-out></testcase><system-out/><system-err/></testsuite></testsuites>`,
			"holds system-out"},
		{`<testsuites>` + suite + `<properties/><testcase name="c" classname="k" time="0"><failure message="m"/></testcase><system-out/><system-err/></testsuite></testsuites>`,
			"no attribute type"},
		{`<testsuites><testsuite name="a" timestamp="2026-03-01T12:30:45Z" hostname="h" tests="0" failures="0" errors="0" time="0" package="p" id="1"><properties/><system-out/><system-err/></testsuite></testsuites>`,
			"timestamp"},
		{`<testsuites><testsuite name="a" timestamp="2026-03-01T12:30:45" hostname="h" tests="0" failures="0" errors="0" time="0" package="p" id="1"><properties/><system-out/><system-err/></testsuite></testsuites>`,
			"id 1, want 0"},
	} {
		errs := strings.Join(junitSchemaErrors([]byte(tc.doc)), "\n")
		if !strings.Contains(errs, tc.says) {
			t.Errorf("%s:\n%s\nwant an error saying %q", tc.doc, errs, tc.says)
		}
	}
}

// TestWriteJUnitSchemaBlankName: a suite whose target has no name, or
// one of XML whitespace only (the schema's name is a token of at least
// one character, after its whitespace collapses), is still valid: a
// Report without Target, a Target named " ", an error that is no
// *Error, a skipped *Error without Target. Each was written name="",
// or name=" &#xA;", and a validating CI step refused the whole file.
func TestWriteJUnitSchemaBlankName(t *testing.T) {
	res := []conformance.Result{{ID: conformance.CheckReplay, Level: conformance.LevelMust, Status: conformance.Pass, Verdict: "ok"}}
	for _, tc := range []struct {
		name    string
		reports []conformance.Report
		errs    []error
	}{
		{"report without target", []conformance.Report{{URL: "http://h/p", Results: res}}, nil},
		{"report of blank target", []conformance.Report{{Target: " \t\r\n", Method: "POST", URL: "http://h/p", Results: res}}, nil},
		{"plain error", nil, []error{errors.New("boom")}},
		{"error without target", nil, []error{&conformance.Error{Cause: conformance.ErrUnreachable, Err: errors.New("refused")}}},
		{"skipped without target", nil, []error{&conformance.Error{Target: " ", Cause: conformance.ErrSkipped, Err: errors.New("why")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := conformance.WriteJUnit(&b, tc.reports, tc.errs...); err != nil {
				t.Fatal(err)
			}
			if errs := junitSchemaErrors(b.Bytes()); len(errs) > 0 {
				t.Errorf("the JUnit report breaks the schemas:\n%s\n\n%s", strings.Join(errs, "\n"), b.String())
			}
		})
	}
}

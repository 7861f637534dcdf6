package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"sort"
	"strings"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/internal/cliflag"
	"github.com/saferetry/saferetry/internal/contract"
	"github.com/saferetry/saferetry/internal/mockcmd"
)

// Exit statuses.
const (
	exitPassed = 0 // every MUST passed (with -strict, every SHOULD too)
	exitFailed = 1 // a MUST failed, or with -strict a SHOULD
	exitUsage  = 2 // bad flags, or the target could not be reached
)

const usage = `usage:
  saferetry check -url URL [flags]      check that an endpoint honours Idempotency-Key
  saferetry check -openapi URL_OR_FILE  check every operation that declares the header
  saferetry mock [flags]                run the mock payments server
Run "saferetry check -h" or "saferetry mock -h" for the flags.
`

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "check":
		return check(ctx, args[1:], stdout, stderr)
	case "mock":
		if err := mockcmd.Run(ctx, "saferetry mock", args[1:], stdout, stderr); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitPassed
			}
			fmt.Fprintln(stderr, err)
			return exitUsage
		}
		return exitPassed
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitPassed
	}
	fmt.Fprintf(stderr, "saferetry: unknown command %q\n%s", args[0], usage)
	return exitUsage
}

// headerFlag collects 'Name: value' flags.
type headerFlag struct{ h http.Header }

func (f *headerFlag) String() string { return "" }

func (f *headerFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
		return fmt.Errorf("want 'Name: value', got %q", v)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(textproto.CanonicalMIMEHeaderKey(name), strings.TrimSpace(value))
	return nil
}

// checkFlags are the flags of check.
type checkFlags struct {
	url, method, body, bodyFile, otherBody string
	profile, countURL, openapi, junit      string
	header, authA, authB                   headerFlag
	concurrency                            int
	keyRequired, json, dryRun, strict      bool
	checker                                conformance.Checker
}

func parseCheck(args []string, stderr io.Writer) (*checkFlags, error) {
	f := &checkFlags{}
	fs := flag.NewFlagSet("saferetry check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.url, "url", "", "the endpoint's URL (with -openapi: the base URL its paths go after)")
	fs.StringVar(&f.method, "method", http.MethodPost, "the request method, in any case: sent upper case (not with -openapi, whose operations have their own)")
	fs.StringVar(&f.body, "body", "", "the request body (JSON)")
	fs.StringVar(&f.bodyFile, "body-file", "", "read the request body from this file")
	fs.StringVar(&f.otherBody, "other-body", "", "a body asking for another operation (default: the body with one more member)")
	fs.Var(&f.header, "header", "`'Name: value'` sent on every request (repeatable)")
	fs.IntVar(&f.concurrency, "concurrency", conformance.DefaultConcurrency, fmt.Sprintf("how many requests with one key are sent at once (at most %d)", conformance.MaxConcurrency))
	fs.StringVar(&f.profile, "profile", "ietf", "ietf or stripe: the levels and statuses to hold the answers to")
	fs.BoolVar(&f.keyRequired, "key-required", false, "the endpoint requires a key: check that a request without one gets 400")
	fs.StringVar(&f.countURL, "count-url", "", "a GET that counts the endpoint's records: a JSON array, a number, or #/pointer or #dotted.path to a count in its JSON (needed for an object)")
	fs.DurationVar(&f.checker.TTL, "ttl", 0, "the retention the API states: re-send the first key after it (and a grace of 1 %, at least 100 ms) and expect a new execution")
	fs.Var(&f.authA, "auth-a", "`'Name: value'` of principal a (repeatable)")
	fs.Var(&f.authB, "auth-b", "`'Name: value'` of principal b (repeatable)")
	fs.StringVar(&f.openapi, "openapi", "", "an OpenAPI 3.x JSON document, `URL or file`: check every operation that declares Idempotency-Key")
	fs.DurationVar(&f.checker.Timeout, "timeout", conformance.DefaultTimeout, "bound on each request")
	fs.BoolVar(&f.json, "json", false, "print one JSON document instead of the table")
	fs.StringVar(&f.junit, "junit", "", "also write a JUnit XML report to this `file`")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the requests it would send, and send none")
	fs.BoolVar(&f.strict, "strict", false, "exit 1 when a SHOULD check fails too, not only a MUST (for CI); the report and -json's \"passed\" still count MUSTs only")
	if err := cliflag.Parse(fs, args); err != nil {
		return nil, err
	}
	// Typed at a shell, "post" means POST; a document's method, which
	// the checker sends as written, is never a flag's. One that is no
	// token is left as typed, for Plan and Run to refuse: upper-cased,
	// "ıtem" would be ITEM.
	// An empty one is the default, as the checker takes an empty
	// Target.Method, so that -dry-run names the method it sends.
	switch {
	case f.method == "":
		f.method = http.MethodPost
	case contract.ValidToken(f.method):
		f.method = strings.ToUpper(f.method)
	}
	methodSet := false
	fs.Visit(func(fl *flag.Flag) { methodSet = methodSet || fl.Name == "method" })
	switch {
	case methodSet && f.openapi != "":
		return nil, errors.New("saferetry check: give -method or -openapi, not both (with -openapi each operation has its method from the document)")
	case f.url == "" && f.openapi == "":
		return nil, errors.New("saferetry check: give -url, or -openapi")
	case f.body != "" && f.bodyFile != "":
		return nil, errors.New("saferetry check: give -body or -body-file, not both")
	case f.concurrency < 2:
		return nil, errors.New("saferetry check: -concurrency must be at least 2")
	case f.checker.TTL < 0 || f.checker.Timeout <= 0:
		return nil, errors.New("saferetry check: -ttl must not be negative, -timeout must be positive")
	case (f.authA.h == nil) != (f.authB.h == nil):
		return nil, errors.New("saferetry check: give -auth-a and -auth-b together")
	}
	p, err := conformance.ParseProfile(f.profile)
	if err != nil {
		return nil, fmt.Errorf("saferetry check: -profile %q: want ietf or stripe", f.profile)
	}
	f.checker.Profile = p
	f.checker.Concurrency = f.concurrency
	f.checker.CountURL = f.countURL
	f.checker.AuthA, f.checker.AuthB = f.authA.h, f.authB.h
	return f, nil
}

// check runs the check subcommand.
func check(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, err := parseCheck(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitPassed
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	targets, skipped, err := f.targets(ctx, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	status := exitPassed
	if len(targets) == 0 { // every operation skipped: nothing is checked, but the reports say why
		fmt.Fprintf(stderr, "saferetry check: -openapi %s: no operation to check: the %d that take Idempotency-Key (or may) were skipped, as said above\n", f.openapi, len(skipped))
		status = exitUsage
		if f.dryRun {
			return status
		}
	}
	if f.dryRun {
		return f.plan(targets, stdout, stderr)
	}

	var reports []conformance.Report
	var failed []error // the targets that could not be checked, for -json and -junit
	for _, t := range targets {
		rep, err := f.checker.Run(ctx, t)
		if err != nil {
			fmt.Fprintln(stderr, describe(err))
			status = exitUsage
			failed = append(failed, err)
			continue
		}
		reports = append(reports, rep)
	}
	// The skipped targets are in the reports CI reads, as skipped: never
	// checked is not passed, nor failed.
	unchecked := append(failed, skipped...)
	if f.json {
		err = conformance.WriteJSON(stdout, reports, unchecked...)
	} else {
		err = conformance.WriteText(stdout, reports)
	}
	if err != nil {
		fmt.Fprintln(stderr, "saferetry check: writing the report:", err)
		return exitUsage
	}
	if f.junit != "" {
		if err := writeJUnit(f.junit, reports, unchecked); err != nil {
			fmt.Fprintln(stderr, "saferetry check: -junit:", err)
			return exitUsage
		}
	}
	if status == exitPassed && !conformance.Passed(reports) {
		status = exitFailed
	}
	if f.strict {
		if failed := failedShoulds(reports); len(failed) > 0 {
			fmt.Fprintf(stderr, "saferetry check: -strict: SHOULD checks failed: %s\n", strings.Join(failed, "; "))
			if status == exitPassed {
				status = exitFailed
			}
		}
	}
	return status
}

// failedShoulds names the SHOULD checks that failed, "target: id, id" for
// each target with one, for -strict.
func failedShoulds(reports []conformance.Report) []string {
	var out []string
	for _, r := range reports {
		var ids []string
		for _, res := range r.Results {
			if res.Level == conformance.LevelShould && res.Status == conformance.Fail {
				ids = append(ids, res.ID)
			}
		}
		if len(ids) > 0 {
			out = append(out, r.Target+": "+strings.Join(ids, ", "))
		}
	}
	return out
}

// describe is the message of a Run error for people.
func describe(err error) string {
	var ce *conformance.Error
	if !errors.As(err, &ce) {
		return "saferetry check: " + err.Error()
	}
	what := "cannot check it"
	switch {
	case errors.Is(err, conformance.ErrUnreachable):
		what = "cannot reach it"
	case errors.Is(err, conformance.ErrInvalid):
		what = "invalid"
	case errors.Is(err, conformance.ErrInterrupted):
		what = "interrupted"
	}
	if ce.Err == nil {
		return fmt.Sprintf("saferetry check: %s: %s", ce.Target, what)
	}
	return fmt.Sprintf("saferetry check: %s: %s: %v", ce.Target, what, ce.Err)
}

func writeJUnit(path string, reports []conformance.Report, failed []error) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := conformance.WriteJUnit(fh, reports, failed...); err != nil {
		_ = fh.Close()
		return err
	}
	return fh.Close()
}

// targets are the endpoints to check: -url's, or -openapi's operations;
// skipped are the operations that cannot be checked, each told on stderr,
// as errors whose cause is conformance.ErrSkipped, for -json and -junit.
// ts is empty when every operation is skipped: the reports are still
// written, to say so.
func (f *checkFlags) targets(ctx context.Context, stderr io.Writer) (ts []conformance.Target, skipped []error, err error) {
	var body, other []byte
	switch {
	case f.bodyFile != "":
		b, err := os.ReadFile(f.bodyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("saferetry check: -body-file: %w", err)
		}
		body = b
	case f.body != "":
		body = []byte(f.body)
	}
	if f.otherBody != "" {
		other = []byte(f.otherBody)
	}
	if f.openapi == "" {
		return []conformance.Target{{Method: f.method, URL: f.url, Body: body, OtherBody: other,
			Header: f.header.h, KeyRequired: f.keyRequired}}, nil, nil
	}
	ops, err := f.operations(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, op := range ops {
		t := op.Target
		if body != nil {
			t.Body = body
		}
		if op.NeedsBody || len(op.NeedsHeaders) > 0 {
			// Unusable for want of what the flags may give.
			var lacks []string
			for _, name := range op.NeedsHeaders {
				if _, ok := f.header.h[name]; !ok {
					lacks = append(lacks, conformance.MissingHeaderReason(name))
				}
			}
			if op.NeedsBody && body == nil {
				lacks = append(lacks, conformance.MissingBodyReason)
			}
			op.Unusable = strings.Join(lacks, "; ")
		}
		if op.Unusable != "" {
			method := cmp.Or(t.Method, `""`) // an additionalOperations entry named ""
			switch {
			case op.PathItem: // it stands for the path's operations, which are unknown
				fmt.Fprintf(stderr, "saferetry check: skipping the operations of path %s: %s\n", op.Path, op.Unusable)
			case op.Webhook != "":
				fmt.Fprintf(stderr, "saferetry check: skipping %s (%s, webhook %q): %s\n", t.Name, method, op.Webhook, op.Unusable)
			default:
				fmt.Fprintf(stderr, "saferetry check: skipping %s (%s %s): %s\n", t.Name, method, op.Path, op.Unusable)
			}
			skipped = append(skipped, &conformance.Error{Target: t.Name, Cause: conformance.ErrSkipped, Err: errors.New(op.Unusable),
				Method: t.Method, Path: op.Path, Webhook: op.Webhook})
			continue
		}
		t.OtherBody = other
		t.KeyRequired = t.KeyRequired || f.keyRequired
		if f.header.h != nil {
			h := t.Header.Clone()
			if h == nil {
				h = http.Header{}
			}
			for name, vs := range f.header.h {
				h[name] = vs
			}
			t.Header = h
		}
		ts = append(ts, t)
	}
	if len(ops) == 0 {
		return nil, nil, fmt.Errorf("saferetry check: -openapi %s: no operation to check: none declares an Idempotency-Key header parameter", f.openapi)
	}
	return ts, skipped, nil
}

// plan prints what -dry-run would send.
func (f *checkFlags) plan(targets []conformance.Target, stdout, stderr io.Writer) int {
	type planned struct {
		Target string `json:"target"`
		// Header is what every request carries besides the key: the
		// document's header parameters, their Content-Type.
		Header   map[string]string            `json:"header,omitempty"`
		Requests []conformance.PlannedRequest `json:"requests"`
	}
	var all []planned
	for _, t := range targets {
		reqs, err := f.checker.Plan(t)
		if err != nil {
			fmt.Fprintln(stderr, describe(err))
			return exitUsage
		}
		all = append(all, planned{Target: t.Method + " " + t.URL, Header: f.shownHeader(t.Header), Requests: reqs})
	}
	if f.json {
		if err := writeIndentedJSON(stdout, all); err != nil {
			fmt.Fprintln(stderr, "saferetry check:", err)
			return exitUsage
		}
		return exitPassed
	}
	for _, p := range all {
		fmt.Fprintf(stdout, "dry run: %s would get these requests, in order (nothing was sent):\n", p.Target)
		if len(p.Header) > 0 {
			lines := make([]string, 0, len(p.Header))
			for name, v := range p.Header {
				lines = append(lines, name+": "+v)
			}
			sort.Strings(lines)
			fmt.Fprintf(stdout, "  every request with %s\n", strings.Join(lines, "; "))
		}
		for _, r := range p.Requests {
			fmt.Fprintf(stdout, "  %3d× %-17s %s %s", r.Times, r.Check, r.Request.Method, r.Request.URL)
			if r.Request.Principal != "" {
				fmt.Fprintf(stdout, " as %s", r.Request.Principal)
			}
			if r.Request.Key != "" {
				fmt.Fprintf(stdout, "  Idempotency-Key: %s", r.Request.Key)
			} else if r.Request.Method != http.MethodGet && r.Check != conformance.CheckMalformedKey { // its note says what it sends
				fmt.Fprint(stdout, "  (no Idempotency-Key)")
			}
			if r.Request.RequestBody != "" {
				fmt.Fprintf(stdout, "  body %s", r.Request.RequestBody)
			}
			if r.Note != "" {
				fmt.Fprintf(stdout, "  (%s)", r.Note)
			}
			fmt.Fprintln(stdout)
		}
	}
	return exitPassed
}

// shownHeader is h as -dry-run shows it: a -header's value (a token,
// perhaps) replaced by "(-header)".
func (f *checkFlags) shownHeader(h http.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for name, vs := range h {
		if _, given := f.header.h[name]; given {
			out[name] = "(-header)"
			continue
		}
		out[name] = strings.Join(vs, ", ")
	}
	return out
}

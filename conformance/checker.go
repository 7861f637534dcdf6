package conformance

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/saferetry/saferetry/internal/contract"
)

// Profile says which convention the levels and accepted statuses follow.
// It is a plain string value, safe to share.
type Profile string

// The profiles.
const (
	// ProfileIETF follows the IETF draft "The Idempotency-Key HTTP Header
	// Field": 422 for a reused key, problem+json errors, Retry-After on 409.
	ProfileIETF Profile = "ietf"
	// ProfileStripe follows Stripe's convention: 400, 409 or 422 for a
	// reused key, errors in the API's own JSON, a replay marked with
	// Idempotent-Replayed.
	ProfileStripe Profile = "stripe"
)

// ParseProfile returns the Profile named s ("ietf" or "stripe"; "" is
// ProfileIETF).
func ParseProfile(s string) (Profile, error) {
	switch p := Profile(strings.ToLower(s)); p {
	case "", ProfileIETF:
		return ProfileIETF, nil
	case ProfileStripe:
		return p, nil
	}
	return "", fmt.Errorf("conformance: profile %q: want ietf or stripe", s)
}

// Target is one endpoint to check: the operation its requests ask for.
// Run and Plan only read it, Body, OtherBody and Header included, so one
// Target may be given to several concurrent runs (from several goroutines)
// as long as nobody changes it, or what it refers to, meanwhile.
type Target struct {
	// Method is the request method, an RFC 9110 token (Run and Plan
	// refuse another with ErrInvalid), sent as written: methods are
	// case-sensitive, "link" is not "LINK". "" means POST.
	Method string
	// URL is the endpoint's absolute http or https URL.
	URL string
	// Body is the request body of the operation, sent as it is. nil sends
	// none.
	Body []byte
	// OtherBody is a body that asks for another operation, for the
	// reuse checks. nil derives one from Body: a JSON object gets one more
	// member ("saferetry_check" with a fresh value), anything else a suffix.
	// Whatever it is, reuse-refused also sends a body as long as Body,
	// derived from it (see the package documentation).
	OtherBody []byte
	// Header is sent on every request, for example Authorization or
	// Content-Type (which defaults to application/json for a body that is
	// JSON). Its names count in any case ("content-type" is Content-Type).
	// An Idempotency-Key in it, in any case, is ignored: the checks set
	// their own. Run and Plan refuse, with ErrInvalid, a name that is not
	// an RFC 9110 token or a value with a control character other than a
	// tab, which no request could carry.
	Header http.Header
	// KeyRequired says the endpoint requires a key: missing-key then sends
	// a request without one. false skips missing-key.
	KeyRequired bool
	// Name names the target in reports (an OpenAPI operationId, say); ""
	// means "METHOD URL".
	Name string
}

func (t Target) method() string {
	if t.Method == "" {
		return http.MethodPost
	}
	return t.Method
}

func (t Target) name() string {
	if t.Name != "" {
		return t.Name
	}
	return t.method() + " " + t.URL
}

// DefaultConcurrency is the size of the burst unless Checker.Concurrency
// says otherwise.
const DefaultConcurrency = 20

// MaxConcurrency is the largest burst Run sends: each of its requests
// takes a goroutine and a connection of its own, and a burst larger than
// one machine can open shows nothing more about one key.
const MaxConcurrency = 1000

// DefaultTimeout bounds each request unless Checker.Timeout says otherwise.
const DefaultTimeout = 10 * time.Second

// Checker runs the checks against targets. The zero value is a valid
// Checker: ProfileIETF, a burst of DefaultConcurrency, no count, principal
// or retention checks. Most callers set the options they need and call Run.
// A Checker is safe for concurrent use by multiple goroutines as long as
// its fields are not changed while it runs.
type Checker struct {
	// Profile chooses levels and accepted statuses; "" means ProfileIETF.
	Profile Profile
	// Concurrency is the number of simultaneous requests with one key of
	// concurrent-once; 0 means DefaultConcurrency. At least 2, at most
	// MaxConcurrency (Run and Plan refuse another with ErrInvalid).
	Concurrency int
	// CountURL, when set, is a GET whose answer counts the endpoint's
	// records, for count-once: with a fragment, the JSON value there (a
	// JSON pointer such as #/meta/total, or a dotted path such as
	// #meta.total; a number, or an array whose length counts). Without
	// one, a JSON array body counts its elements and a JSON number is the
	// count; any other JSON body (an object) makes Run fail with
	// ErrInvalid, asking for the fragment; a body that is not JSON is
	// counted by its size in bytes, which count-once then never takes for
	// a FAIL (a later record may be longer): it passes when every
	// operation added as many bytes, and warns otherwise.
	// "" skips count-once.
	CountURL string
	// TTL is the retention the endpoint states: ttl-expiry re-sends the
	// first request's key once TTL and a grace (1 % of TTL, at least
	// 100 ms) have passed since its answer and expects a new execution.
	// 0 skips ttl-expiry.
	TTL time.Duration
	// AuthA and AuthB are the headers of two principals (for example two
	// Authorization values), for scope-isolation; unless both are set it
	// is skipped. A principal's headers replace the Target's of the same
	// name, in any case. Run and Plan refuse their headers with
	// ErrInvalid as they refuse Target.Header's.
	AuthA, AuthB http.Header
	// Timeout bounds each request; 0 means DefaultTimeout.
	Timeout time.Duration
	// Client sends the requests; nil means a client of the Checker's own
	// that keeps Concurrency connections per host and follows no redirect.
	// A client given here should not follow redirects either.
	Client *http.Client
}

// ErrUnreachable is the cause of Run's error when the target, or CountURL,
// could not be reached at all: no check could run. Match it with
// errors.Is.
var ErrUnreachable = errors.New("conformance: target unreachable")

// ErrInvalid is the cause of Run's and Plan's error when the Checker or
// the Target is not usable (a bad URL, method or header, a negative
// duration, a burst over MaxConcurrency), or CountURL's first answer holds
// no count.
var ErrInvalid = errors.New("conformance: invalid configuration")

// ErrInterrupted is the cause of Run's error when its context ended
// before the checks were through; the error also matches the context's
// error (context.Canceled or context.DeadlineExceeded).
var ErrInterrupted = errors.New("conformance: run interrupted")

// ErrSkipped is the cause of an Error that stands for a target left
// unchecked on purpose, such as an Operation that is Unusable, its Err
// saying why. Run and Plan never return it: a caller makes it, for
// WriteJSON and WriteJUnit, which report such a target as skipped, not
// as an error, and do not count it against the report's passing.
var ErrSkipped = errors.New("conformance: target skipped")

// Error is the error Run and Plan return, with the target it concerns.
// errors.Is on it matches its Cause, ErrUnreachable, ErrInvalid or
// ErrInterrupted (or ErrSkipped, in one a caller made), and its Err. Its methods only read it, so it is safe for
// concurrent use as long as nobody changes its fields.
type Error struct {
	Target string // the target's name
	Cause  error  // ErrUnreachable, ErrInvalid, ErrInterrupted or ErrSkipped
	Err    error  // what happened; may be nil
	// Method and Path are, in one a caller made for an Operation it
	// skips (ErrSkipped), the operation's method and its path as the
	// document writes it, which WriteJSON reports beside Target; ""
	// when unknown (a path item's operations have no method). Run and
	// Plan leave them "".
	Method, Path string
	// Webhook is, in the same, the name of the webhook the operation is
	// of (Operation.Webhook), which WriteJSON reports; "" for an
	// operation of the document's paths.
	Webhook string
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Cause.Error() + ": " + e.Target
	}
	return e.Cause.Error() + ": " + e.Target + ": " + e.Err.Error()
}

// Unwrap returns the cause and the underlying error.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Cause}
	}
	return []error{e.Cause, e.Err}
}

// validate refuses a Checker or Target that could not run.
func (c *Checker) validate(t Target) error {
	bad := func(format string, args ...any) error {
		return &Error{Target: t.name(), Cause: ErrInvalid, Err: fmt.Errorf(format, args...)}
	}
	if t.Method != "" && !contract.ValidToken(t.Method) {
		return bad("method %q: not an HTTP method (an RFC 9110 token)", t.Method)
	}
	if err := absoluteURL(t.URL); err != nil {
		return bad("url: %w", err)
	}
	for _, h := range []struct {
		what string
		h    http.Header
	}{{"header", t.Header}, {"principal a's header", c.AuthA}, {"principal b's header", c.AuthB}} {
		if err := validHeader(h.h); err != nil {
			return bad("%s %w", h.what, err)
		}
	}
	if c.CountURL != "" {
		if err := absoluteURL(c.CountURL); err != nil {
			return bad("count url: %w", err)
		}
	}
	if _, err := ParseProfile(string(c.Profile)); err != nil {
		return bad("%w", err)
	}
	switch {
	case c.Concurrency < 0 || c.Concurrency == 1 || c.Concurrency > MaxConcurrency:
		return bad("concurrency %d: want at least 2 and at most %d", c.Concurrency, MaxConcurrency)
	case c.TTL < 0 || c.Timeout < 0:
		return bad("ttl and timeout must not be negative")
	case (len(c.AuthA) == 0) != (len(c.AuthB) == 0):
		return bad("give the headers of both principals, or of neither")
	}
	return nil
}

// validHeader refuses a header that net/http would not send: a name that
// is not a token, a value with a control character other than a tab.
func validHeader(h http.Header) error {
	for _, name := range slices.Sorted(maps.Keys(h)) {
		if !contract.ValidToken(name) {
			return fmt.Errorf("%q: the name is not an RFC 9110 token", name)
		}
		for _, v := range h[name] {
			if !contract.ValidFieldValue(v) {
				return fmt.Errorf("%q: the value %q holds a control character", name, v)
			}
		}
	}
	return nil
}

func absoluteURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http or https URL", s)
	}
	return nil
}

func (c *Checker) profile() Profile {
	p, _ := ParseProfile(string(c.Profile))
	return p
}

func (c *Checker) concurrency() int {
	if c.Concurrency == 0 {
		return DefaultConcurrency
	}
	return c.Concurrency
}

func (c *Checker) timeout() time.Duration {
	if c.Timeout == 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

func (c *Checker) client() *http.Client {
	if c.Client != nil {
		return c.Client
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = c.concurrency() + 2
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

package conformance

import (
	"net/http"
	"time"
)

// Level is how binding a check is: MUST, SHOULD or INFO. It is a plain
// string value, safe to share.
type Level string

// The levels.
const (
	LevelMust   Level = "MUST"
	LevelShould Level = "SHOULD"
	LevelInfo   Level = "INFO"
)

// Status is a check's outcome. It is a plain string value, safe to share.
type Status string

// The statuses.
const (
	// Pass: the answers showed what the check asks for.
	Pass Status = "PASS"
	// Fail: an answer contradicts it; the evidence shows which.
	Fail Status = "FAIL"
	// Warn: an INFO check that does not hold, or a check that held but
	// could not be fully shown (see the verdict).
	Warn Status = "WARN"
	// Skip: the check did not run (its option is unset, or what it builds
	// on failed).
	Skip Status = "SKIP"
)

// Result is the outcome of one check against one target. Like Report, it
// is a value: it may be read from several goroutines at once, but not
// changed (its Evidence included) while others read it.
type Result struct {
	// ID is the check's stable identifier, such as "replay".
	ID string `json:"id"`
	// Title says in a few words what the check asks for.
	Title string `json:"title"`
	// Level is the check's level under the report's profile.
	Level Level `json:"level"`
	// Status is its outcome.
	Status Status `json:"status"`
	// Verdict is one line saying why.
	Verdict string `json:"verdict"`
	// Evidence is the exchanges the verdict rests on, in the order sent.
	Evidence []Exchange `json:"evidence,omitempty"`
}

// Report is the outcome of every check against one target. It is a value:
// safe to read from several goroutines.
type Report struct {
	// Target is the target's name ("METHOD URL" unless named).
	Target string `json:"target"`
	// Method and URL are the target's.
	Method string `json:"method"`
	URL    string `json:"url"`
	// Profile is the profile the levels follow.
	Profile Profile `json:"profile"`
	// Results holds one Result per check, in the order of the package
	// documentation's table.
	Results []Result `json:"results"`
	// Started is when the checks began; the zero time when unknown (a
	// Report not made by Run).
	Started time.Time `json:"started,omitzero"`
	// Elapsed is how long the checks took.
	Elapsed Duration `json:"elapsed"`
}

// Passed reports whether every MUST check of r passed (or was skipped).
func (r Report) Passed() bool {
	for _, res := range r.Results {
		if res.Level == LevelMust && res.Status == Fail {
			return false
		}
	}
	return true
}

// Result returns the result of the check id, and whether r has it.
func (r Report) Result(id string) (Result, bool) {
	for _, res := range r.Results {
		if res.ID == id {
			return res, true
		}
	}
	return Result{}, false
}

// Failed returns the IDs of the checks that failed, whatever their level.
func (r Report) Failed() []string {
	var ids []string
	for _, res := range r.Results {
		if res.Status == Fail {
			ids = append(ids, res.ID)
		}
	}
	return ids
}

// Duration is a time.Duration that marshals to JSON as its string form
// ("1.5s"). It is a plain value, safe to share.
type Duration time.Duration

// MarshalText writes d as time.Duration's String does.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads what MarshalText writes.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// Exchange is one request the checker sent and the answer it got, as
// evidence: the Idempotency-Key as sent, the principal's name when a
// check sent the headers of one, and excerpts of both bodies. Header
// values the caller gave are never included. It is a value: it may be read
// from several goroutines at once, but not changed (its Header map
// included) while others read it.
type Exchange struct {
	Method string `json:"method"`
	URL    string `json:"url"`
	// Key is the Idempotency-Key value sent, its field lines joined by
	// ", " when several were; "" when none was, or an empty one.
	Key string `json:"idempotency_key,omitempty"`
	// Principal is "a" or "b" for a request with AuthA's or AuthB's
	// headers.
	Principal string `json:"principal,omitempty"`
	// RequestBody is an excerpt of the body sent, as Body is of the
	// answer's; "" when none was.
	RequestBody string `json:"request_body,omitempty"`
	// Status is the answer's status; 0 when none came (see Error).
	Status int `json:"status,omitempty"`
	// Header holds the answer's headers that the checks read:
	// Content-Type, Location, Etag, Last-Modified, Link,
	// Content-Location, Retry-After, Idempotent-Replayed; several values
	// of one are joined with ", ".
	Header map[string]string `json:"header,omitempty"`
	// Body is an excerpt of the answer's body: its first bytes, quoted
	// Go-style when they are not UTF-8.
	Body string `json:"body,omitempty"`
	// Error says why no answer came.
	Error string `json:"error,omitempty"`
	// Elapsed is the time from sending the request to having read the
	// answer's body (its first 4 MiB at most), or to the error that ended
	// it.
	Elapsed Duration `json:"elapsed"`

	body   []byte      // the whole answer body
	header http.Header // the whole answer header
	sent   time.Time   // when the answer was read
	began  time.Time   // when the request was sent
}

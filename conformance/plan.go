package conformance

import (
	"net/http"
	"net/url"
	"strings"
)

// plan is every request a run sends but the CountURL reads, with the keys
// of this run.
type plan struct {
	first, replay, reuse spec
	otherAlone           spec // the other body with a key of its own: is it refused whatever the key?
	sameLength           spec // the first key with a body as long as the first: is the key bound to the length alone? No body: not sent
	otherPath            spec // the first key and body at a path below the URL's: is the key bound to its endpoint?
	missing, long        spec
	malformed            []malformedSpec
	burst                spec // sent Concurrency times at once, then until it settles
	scopeA, scopeB       spec
	scopeBAlone          spec // principal b's body with a key of its own: is b refused whatever the key?
	ttl                  spec
}

func (c *Checker) newPlan(t Target) plan {
	m := t.method()
	req := func(key string, body []byte) spec { return spec{method: m, url: t.URL, key: key, body: body} }
	other := t.OtherBody
	if other == nil {
		other = otherBody(t.Body)
	}
	k1, k3, k4, k5 := newKey("first"), newKey("scope"), newKey("other"), newKey("scope-b")
	// The burst's key is the first's in upper case: another key to a
	// server that compares keys byte for byte, as it must, and the first
	// request's to one that folds their case.
	k2 := strings.ToUpper(k1)
	p := plan{
		first:      req(k1, t.Body),
		replay:     req(k1, t.Body),
		reuse:      req(k1, other),
		otherAlone: req(k4, other),
		sameLength: req(k1, sameLengthBody(t.Body)),
		otherPath:  spec{method: m, url: otherPathURL(t.URL), key: k1, body: t.Body},
		missing:    req("", t.Body),
		long:       req(longKey(), t.Body),
		burst:      req(k2, t.Body),
		scopeA:     req(k3, t.Body),
		scopeB:     req(k3, t.Body),
		ttl:        req(k1, t.Body),
	}
	p.scopeBAlone = req(k5, t.Body)
	for _, mk := range malformedKeys() {
		s := req("", t.Body)
		s.keyLines = mk.lines
		p.malformed = append(p.malformed, malformedSpec{what: mk.what, spec: s})
	}
	p.scopeA.principal, p.scopeA.auth = "a", c.AuthA
	p.scopeB.principal, p.scopeB.auth = "b", c.AuthB
	p.scopeBAlone.principal, p.scopeBAlone.auth = "b", c.AuthB
	return p
}

// malformedSpec is one request of malformed-key, with what its key is.
type malformedSpec struct {
	what string
	spec
}

// PlannedRequest is one request that Run would send, for a dry run. It is
// a value: it may be read from several goroutines at once, but not changed
// while others read it.
type PlannedRequest struct {
	// Check is the ID of the check that sends it.
	Check string `json:"check"`
	// Times is how often it is sent: Concurrency at once for the burst.
	Times int `json:"times"`
	// Exchange holds the request: Method, URL, Key, Principal,
	// RequestBody.
	Request Exchange `json:"request"`
	// Note says when or why it is sent.
	Note string `json:"note,omitempty"`
}

// Plan returns the requests Run would send to t, in order, without
// sending any; the keys are fresh for each call, as in Run. Its error is
// an *Error with cause ErrInvalid.
func (c *Checker) Plan(t Target) ([]PlannedRequest, error) {
	if err := c.validate(t); err != nil {
		return nil, err
	}
	p := c.newPlan(t)
	var out []PlannedRequest
	add := func(check string, s spec, times int, note string) {
		ex := s.exchange()
		out = append(out, PlannedRequest{Check: check, Times: times, Request: ex, Note: note})
	}
	count := func(note string) {
		if c.CountURL != "" {
			out = append(out, PlannedRequest{Check: CheckCountOnce, Times: 1,
				Request: Exchange{Method: http.MethodGet, URL: c.CountURL}, Note: note})
		}
	}
	count("count before the first request")
	add(CheckFirstRequest, p.first, 1, "")
	count("count after it")
	add(CheckReplay, p.replay, 1, "the same key and body")
	add(CheckReuseRefused, p.reuse, 1, "the same key, another body")
	if p.sameLength.body != nil {
		add(CheckReuseRefused, p.sameLength, 1, "the same key, a body as long as the first, one byte of a value changed: only when the reuse is refused, to catch a key bound to its body's length")
	}
	count("count after the replay and the reuse")
	add(CheckReuseRefused, p.otherAlone, 1, "another key, the other body: only when the reuse is refused, to tell a refused key from a refused body")
	add(CheckReuseRefused, p.otherPath, 1, "the same key and body at a path of no endpoint: anything but the first request's answer (404 or 405 for the route, 422 for the key), to catch a key not bound to its endpoint")
	if t.KeyRequired {
		add(CheckMissingKey, p.missing, 1, "")
	}
	for _, m := range p.malformed {
		add(CheckMalformedKey, m.spec, 1, "the key: "+m.what)
	}
	add(CheckLongKey, p.long, 1, "")
	count("count before the burst")
	add(CheckConcurrentOnce, p.burst, c.concurrency(), "all at once, then again while the answer is 409 (at most 10 times); the key is the first request's in upper case, another key")
	count("count after the burst")
	if len(c.AuthA) > 0 {
		add(CheckScopeIsolation, p.scopeA, 1, "with -auth-a")
		add(CheckScopeIsolation, p.scopeB, 1, "with -auth-b, the same key and body")
		add(CheckScopeIsolation, p.scopeBAlone, 1, "with -auth-b, another key: only when b's request is refused (4xx), to tell a shared key from a refused principal")
	}
	if c.TTL > 0 {
		count("count before the re-send")
		add(CheckTTLExpiry, p.ttl, 1, "the first request's key, "+(c.TTL+ttlGrace(c.TTL)).String()+" after its answer (the TTL and a grace of 1 %, at least 100 ms)")
		count("count after it")
	}
	return out, nil
}

// otherPathURL is u with a path segment of its own added, "saferetry-check-"
// and a fresh UUID, its query kept: an endpoint no server has, where the
// first request's key and body are another request. The path stays as u
// writes it (a%2Fb is not a/b), so that the segment goes below u's
// endpoint and not beside it.
func otherPathURL(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u // not reached: Plan and Run validate the URL first
	}
	seg := "/" + newKey("path") // unreserved characters only: the same escaped
	pu.Path = strings.TrimSuffix(pu.Path, "/") + seg
	if pu.RawPath != "" {
		pu.RawPath = strings.TrimSuffix(pu.RawPath, "/") + seg
	}
	return pu.String()
}

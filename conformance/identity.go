package conformance

import (
	"bytes"
	"encoding/json"
	"strings"
)

// A success's resource identity: its Location, the "id" member of its JSON
// body, or the body itself (see the package documentation).

// jsonID returns the top-level "id" member of a JSON object body, as its
// text ("" when there is none).
func jsonID(body []byte) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return ""
	}
	raw, ok := obj["id"]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if t := strings.TrimSpace(string(raw)); t != "null" {
		return t
	}
	return ""
}

// location returns ex's Location header.
func (ex Exchange) location() string {
	if ex.header == nil {
		return ""
	}
	return ex.header.Get("Location")
}

// identified reports whether ex names its resource (a Location or an id),
// so that two answers can be told apart by more than their bytes.
func (ex Exchange) identified() bool { return ex.location() != "" || jsonID(ex.body) != "" }

// sameResource reports whether the successes a and b name one resource:
// one Location when both have one, else one id when both have one, else
// equal bodies. Two Locations or ids that differ are two resources, however
// alike the bodies.
func sameResource(a, b Exchange) bool {
	if la, lb := a.location(), b.location(); la != "" && lb != "" {
		return la == lb
	}
	if ia, ib := jsonID(a.body), jsonID(b.body); ia != "" && ib != "" {
		return ia == ib
	}
	return bytes.Equal(a.body, b.body)
}

// firstsAnswer reports whether ex got first's answer: its status and
// bytes, and no other resource (a Location or id of its own tells another
// run whose bytes are alike, a 202 "queued" with its own Location, say).
func firstsAnswer(first, ex Exchange) bool {
	return ex.answered() && ex.Status == first.Status && bytes.Equal(ex.body, first.body) && sameResource(first, ex)
}

// describeResource names ex's resource for a verdict.
func describeResource(ex Exchange) string {
	if l := ex.location(); l != "" {
		return "Location " + l
	}
	if id := jsonID(ex.body); id != "" {
		return "id " + id
	}
	return "body " + ex.Body
}

// resources groups successes by resource: one entry, the first success
// naming it, per resource.
func resources(succ []Exchange) []Exchange {
	var reps []Exchange
next:
	for _, s := range succ {
		for _, r := range reps {
			if sameResource(r, s) {
				continue next
			}
		}
		reps = append(reps, s)
	}
	return reps
}

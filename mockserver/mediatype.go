package mockserver

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/saferetry/saferetry/idempotency"
)

// acceptedMediaType is the media type of the payment bodies that POST
// /payments takes, the Accept header of its 415 answers.
const acceptedMediaType = "application/json"

// requireJSON answers a request whose body is declared as anything but
// JSON in UTF-8 (see mediaTypeRefusal) with a 415 problem and an Accept
// header naming what is taken, one whose body has a content coding (see
// codingRefusal) with a 415 problem and Accept-Encoding: identity (RFC
// 9110, section 15.5.16), and passes the rest to next. In front of the idempotency Middleware, so the
// refusal claims and stores nothing, like the Middleware's own 413: the
// server never read the body as a payment, and a client that fixes its
// Content-Type may send the same key again. Stored, the 415 would be
// replayed to that client, whose fixed request has the same fingerprint
// when it had no media type that the fingerprint names (see
// idempotency.Fingerprint), or it would get 422.
//
// A request without an Idempotency-Key, or with one that does not parse
// (idempotency.KeyFromHeader, the Middleware's own parser), goes to next
// whatever its media type: the Middleware answers it the contract's 400
// before it reads the body or claims anything, as it answers every other
// payment without a valid key.
func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		typeWhy := mediaTypeRefusal(r.Header["Content-Type"])
		codingWhy := codingRefusal(r.Header["Content-Encoding"])
		if typeWhy == "" && codingWhy == "" {
			next.ServeHTTP(w, r)
			return
		}
		// Parsed on the refusals' path only, which keeps the key's parse
		// off the path of every payment taken.
		if _, err := idempotency.KeyFromHeader(r.Header); err != nil {
			next.ServeHTTP(w, r)
			return
		}
		if typeWhy != "" {
			w.Header().Set("Accept", acceptedMediaType)
			writeProblem(w, problem{Type: ProblemUnsupportedMediaType, Title: "Unsupported Media Type", Status: http.StatusUnsupportedMediaType,
				Detail: "POST /payments takes a JSON body, as " + acceptedMediaType + " (or a +json type) in UTF-8: " + typeWhy})
			return
		}
		w.Header().Set("Accept-Encoding", "identity")
		writeProblem(w, problem{Type: ProblemUnsupportedMediaType, Title: "Unsupported Media Type", Status: http.StatusUnsupportedMediaType,
			Detail: "POST /payments takes its " + acceptedMediaType + " body uncompressed: " + codingWhy})
	})
}

// mediaTypeRefusal says why a body with the Content-Type lines ct is not
// one that POST /payments reads, or returns "" for one it reads:
// application/json or an application/*+json type (as Spring's and ASP.NET
// Core's JSON readers take), its type and parameter names in any case,
// its charset, when given, utf-8 in any case (RFC 8259, section 8.1: JSON
// is UTF-8), its other parameters ignored; or no Content-Type at all,
// which RFC 9110 (section 8.3) lets the server take by examining the
// data, as the idempotency fingerprint takes it for application/json.
func mediaTypeRefusal(ct []string) string {
	switch {
	case len(ct) == 0:
		return ""
	case len(ct) > 1:
		return "Content-Type is given " + strconv.Itoa(len(ct)) + " times; give it once"
	case strings.TrimSpace(ct[0]) == "":
		return "Content-Type is empty"
	}
	if commonJSON(ct[0]) {
		return ""
	}
	return parsedRefusal(ct[0])
}

// parsedRefusal is mediaTypeRefusal of one Content-Type line ct, read by
// mime.ParseMediaType.
func parsedRefusal(ct string) string {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return "Content-Type " + strconv.Quote(ct) + " is not a media type (" + err.Error() + ")"
	}
	if sub, ok := strings.CutPrefix(mt, "application/"); !ok || sub != "json" && !strings.HasSuffix(sub, "+json") {
		return "got " + mt
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return "got charset=" + cs + "; JSON is UTF-8 (RFC 8259, section 8.1)"
	}
	return ""
}

// commonJSON reports whether ct is what nearly every client sends for
// JSON, in any case: application/json, alone or with charset=utf-8. It
// takes them without mime.ParseMediaType, which allocates.
func commonJSON(ct string) bool {
	rest, ok := cutPrefixFold(ct, "application/json")
	if !ok {
		return false
	}
	if rest = strings.TrimLeft(rest, " \t"); rest == "" {
		return true
	}
	if rest, ok = strings.CutPrefix(rest, ";"); !ok {
		return false
	}
	rest, ok = cutPrefixFold(strings.TrimLeft(rest, " \t"), "charset=utf-8")
	return ok && strings.TrimRight(rest, " \t") == ""
}

// cutPrefixFold is strings.CutPrefix with the prefix matched in any case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

// codingRefusal says why a body with the Content-Encoding lines ce is not
// one that POST /payments reads, or returns "" for one it reads: a body
// without a content coding, or with identity alone. The server decodes
// none (gzip, br, deflate), and read compressed the body is no JSON.
func codingRefusal(ce []string) string {
	for _, line := range ce {
		for _, c := range strings.Split(line, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return "Content-Encoding " + strings.Join(ce, ", ") + " is not taken; send the body without a content coding"
			}
		}
	}
	return ""
}

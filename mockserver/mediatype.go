package mockserver

import (
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/contract"
)

// acceptedMediaType is the media type of the payment bodies that POST
// /payments takes, the Accept header of its 415 answers.
const acceptedMediaType = "application/json"

// requireJSON answers a request whose body is declared as anything but
// JSON in UTF-8 (see mediaTypeRefusal) with a 415 problem and an Accept
// header naming what is taken, one whose body has a content coding (see
// codingRefusal) with a 415 problem and Accept-Encoding: identity (RFC
// 9110, section 15.5.16), and passes the rest to next, the idempotency
// Middleware. The refusal claims and stores nothing, like the Middleware's
// own 413: the server never read the body as a payment, and a client that
// fixes its Content-Type may send the same key again. Stored, the 415
// would be replayed to that client, whose fixed request has the same
// fingerprint when it had no media type that the fingerprint names (see
// idempotency.Fingerprint), or it would get 422.
//
// Only a request that the Middleware would run is refused so: one with a
// valid Idempotency-Key (idempotency.KeyFromHeader, the Middleware's own
// parser) that the store holds no entry for. A request without a key, or
// with one that does not parse, goes to next, which answers it the
// contract's 400 before it reads the body or claims anything. So does one
// whose key has an entry, or whose lookup failed: the Middleware answers
// it from the entry, as any retry, so that a client that takes 415 as
// final does not take a payment that was made for one that was not: the
// stored answer replayed, or 422 when its fingerprint differs; 409
// ProblemInProgress, with the Middleware's Retry-After, while the first
// request runs (or, under idempotency.WithWaitForResult, the answer it
// waited for); 503 when the store is down. The lookup is a Store.Get,
// which changes nothing (in transactional mode, a claim rolled back: see
// probe). Passed on, the request is marked (refusing) so
// that the Middleware's Claim of it claims nothing: in lease mode it looks
// the key up again and answers from the entry found, and never takes a
// claim over, its lease live or lapsed (at once, when the first lookup
// failed, or as the Middleware claims again while it waits), whose
// release would leave its holder, which may still be paying, unable to
// record its outcome, and the next refused retry answered 415, "neither
// run nor stored", for a paid key (see refusalGuard). A record gone in
// between declines the claim, and the handler answers without one: see
// refuseUnderClaim. In
// transactional mode a claim in progress is a row not yet committed,
// which Get does not see; the lookup's claim waits for it, up to the
// store's lock timeout, and the Middleware's Claim answers from what it
// found (see refusedTx), without waiting again: 409 when the row was
// still held then, or from the record once it committed.
func (s *Server) requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		typeWhy, codingWhy := refusals(r)
		if typeWhy == "" && codingWhy == "" {
			next.ServeHTTP(w, r)
			return
		}
		// Parsed and looked up on the refusals' path only, which keeps
		// both off the path of every payment taken.
		key, err := idempotency.KeyFromHeader(r.Header)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		rf := &refusal{typeWhy: typeWhy, codingWhy: codingWhy}
		if !s.keyHeld(r, key, rf) {
			refuseMediaType(w, typeWhy, codingWhy, unheldKey)
			return
		}
		next.ServeHTTP(w, refusing(r, rf)) // answered from the record, never claimed: see refusalGuard
	})
}

// What the detail of a 415 says of the key, at its end.
const (
	unheldKey   = ". The store holds no record of this Idempotency-Key: this request was neither run nor stored, and the same key may be sent again with the body as JSON."
	unlookedKey = ". The idempotency store could not be reached, so the record of this Idempotency-Key was not looked up (a payment made under it is not answered here): this request was neither run nor stored; send the same key again with the body as JSON."
)

// refuseMediaType answers 415 for the media type (typeWhy, see
// mediaTypeRefusal) or, when that is taken, for the content coding
// (codingWhy, see codingRefusal), its detail ending with keyTail.
func refuseMediaType(w http.ResponseWriter, typeWhy, codingWhy, keyTail string) {
	if typeWhy != "" {
		w.Header().Set("Accept", acceptedMediaType)
		writeProblem(w, problem{Type: ProblemUnsupportedMediaType, Title: "Unsupported Media Type", Status: http.StatusUnsupportedMediaType,
			Detail: "POST /payments takes a JSON body, as " + acceptedMediaType + " (or a +json type) in UTF-8: " + typeWhy + keyTail})
		return
	}
	w.Header().Set("Accept-Encoding", "identity")
	writeProblem(w, problem{Type: ProblemUnsupportedMediaType, Title: "Unsupported Media Type", Status: http.StatusUnsupportedMediaType,
		Detail: "POST /payments takes its " + acceptedMediaType + " body uncompressed: " + codingWhy + keyTail})
}

// keyHeld reports whether the store holds an entry for the Idempotency-Key
// key of r in the server's scope, or could not tell (held), which it notes
// in rf (unlooked). In transactional mode it asks with a claim rolled back
// (see probe), which sees a claim in progress, and keeps in rf (probed)
// the entry found, for the Middleware's Claim to answer from.
func (s *Server) keyHeld(r *http.Request, key string, rf *refusal) bool {
	scope, err := s.scope(r)
	if err != nil {
		rf.unlooked = true
		return true // the Middleware answers a scope that fails
	}
	k := idempotency.Key{Scope: scope, Key: key}
	if txs, ok := s.store.(idempotency.TxStore); ok {
		res, err := probe(r.Context(), txs, k, s.refKeep)
		switch {
		case err != nil:
			rf.unlooked = true
		case res.Acquired:
			return false
		default:
			rf.probed = &res.Entry
		}
		return true
	}
	_, found, err := s.store.Get(r.Context(), k)
	rf.unlooked = err != nil
	return found || err != nil
}

// refuseKeyChanged answers a request that requireJSON refuses and passed
// on, whose key's entry was gone when it was to be answered from it, with
// 503 ProblemKeyChanged and Retry-After: nothing is run or stored. Its
// detail says that the entry went away, or, when requireJSON could not
// look the key up (unlooked), that there is none now: there may never
// have been one.
func refuseKeyChanged(w http.ResponseWriter, unlooked bool) {
	what := "the entry of this Idempotency-Key (its record, or its first request's claim), found when this request came in, went away before the request was answered from it"
	if unlooked {
		what = "this Idempotency-Key could not be looked up when the request came in, and the store holds no entry of it now"
	}
	contract.WriteProblem(w, http.StatusServiceUnavailable, problem{Type: ProblemKeyChanged, Title: "Service Unavailable", Status: http.StatusServiceUnavailable,
		Detail: "the body is not " + acceptedMediaType + " and " + what + "; nothing was run or stored: retry with the same key"}, 1)
}

// refusals says why a payment's media type and content coding are
// refused, "" for each that is not.
func refusals(r *http.Request) (typeWhy, codingWhy string) {
	return mediaTypeRefusal(r.Header["Content-Type"]), codingRefusal(r.Header["Content-Encoding"])
}

// refuseUnderClaim answers, in place of next, the payment handler, a
// request that requireJSON refuses but passed on because its key's entry
// was there (or its lookup failed), when the Middleware's Claim found the
// entry gone (it expired, or its holder released it, after requireJSON
// looked) and was declined (see refusalGuard): the handler runs without a
// claim, and stores nothing. It answers 503 with Retry-After,
// ProblemKeyChanged, so that the retry meets requireJSON again and is
// answered 415, or from whatever the key holds by then. A request run
// without a claim because the store could not be reached, as the
// Middleware runs one under WithFailOpen, is answered 415: nothing is
// stored. Under a claim, which a refused request never gets, it would
// answer the 503, which the Middleware does not store: a 415 would be
// stored under the key. The body, which the server does not read, is never
// run as a payment. The request is told by requireJSON's mark (see
// refusing), not by its headers, which a handler middleware
// (WithHandlerMiddleware) may have changed.
func refuseUnderClaim(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rf := refusalOf(r.Context())
		if rf == nil {
			next.ServeHTTP(w, r)
			return
		}
		if _, claimed := idempotency.TokenFromContext(r.Context()); !claimed && !rf.declined {
			refuseMediaType(w, rf.typeWhy, rf.codingWhy, unlookedKey)
			return
		}
		refuseKeyChanged(w, rf.unlooked)
	})
}

// mediaTypeRefusal says why a body with the Content-Type lines ct is not
// one that POST /payments reads, or returns "" for one it reads:
// application/json or an application/*+json type (as Spring's and ASP.NET
// Core's JSON readers take), but not a range ("*" in the subtype, which
// only an Accept header may hold) nor a suffix without a name
// (application/+json), its type and parameter names in any case,
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
	sub, ok := strings.CutPrefix(mt, "application/")
	switch {
	case !ok || sub != "json" && !strings.HasSuffix(sub, "+json"):
		return "got " + mt
	case strings.Contains(sub, "*"):
		return "got " + mt + ", a media range, which names no media type"
	case sub == "+json":
		return "got " + mt + ", a +json suffix without a name before it"
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
// The prefix as given, the usual case, is compared first: a plain
// comparison costs a fraction of strings.EqualFold.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) {
		return s, false
	}
	if head := s[:len(prefix)]; head != prefix && !strings.EqualFold(head, prefix) {
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

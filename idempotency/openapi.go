package idempotency

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/saferetry/saferetry/internal/contract"
)

// OpenAPIVersion is the version of OpenAPI that OpenAPIFragment speaks.
const OpenAPIVersion = "3.1.0"

// OpenAPIPolicyVersion is the version of the x-idempotency object that
// OpenAPIPolicy describes, in its "version" member.
const OpenAPIPolicyVersion = 1

// OpenAPI describes the Middleware that opts configure (the same options as
// given to Middleware) as a fragment of an OpenAPI 3.1 document: the
// reusable objects of the contract (the Idempotency-Key header parameter,
// the Idempotent-Replayed and Retry-After headers, the problem documents
// and the problem responses) and its policy, the x-idempotency object (see
// "OpenAPI" in the package documentation). It reads the options only:
// nothing is started, and no store is needed.
//
// With WithScope the options do not say who owns a key, so Policy.Scope.By
// is "custom": set it (and its Description) before rendering, for example
// to "principal".
func OpenAPI(opts ...Option) *OpenAPIFragment {
	c := newConfig(opts)
	replay := slices.Sorted(maps.Keys(c.replayHeaders))
	methods := c.methods // sorted; c is this call's own
	scope := OpenAPIScope{By: ScopeGlobal}
	if c.scope != nil {
		scope.By = ScopeCustom
	}
	failure := StoreFailClosed
	if c.failOpen {
		failure = StoreFailOpen
	}
	return &OpenAPIFragment{Policy: OpenAPIPolicy{
		Version:      OpenAPIPolicyVersion,
		Header:       HeaderIdempotencyKey,
		Methods:      methods,
		KeyRequired:  c.keyRequired,
		MaxKeyLength: contract.MaxKeyLen,
		TTLSeconds:   c.ttl.Seconds(),
		Scope:        scope,
		Fingerprint: OpenAPIFingerprint{
			Version:      fingerprintVersion[:len(fingerprintVersion)-1],
			Covers:       []string{"method", "path", "query", "mediaType", "body"},
			JSONBody:     "canonical",
			MaxBodyBytes: c.maxRequestBody,
		},
		Replay: OpenAPIReplay{
			Header:         HeaderReplayed,
			StoredBelow:    http.StatusInternalServerError,
			NotStored:      contract.NotStored(),
			Headers:        replay,
			MaxBodyBytes:   int64(c.maxResponse),
			OversizeStatus: http.StatusGone,
		},
		Conflict: OpenAPIConflict{
			InProgressStatus: http.StatusConflict,
			RetryAfter:       true,
			WaitSeconds:      c.wait.Seconds(),
			MismatchStatus:   http.StatusUnprocessableEntity,
		},
		StoreFailure: failure,
	}}
}

// The words of OpenAPIScope.By that OpenAPI sets.
const (
	// ScopeGlobal: every caller shares one scope (no WithScope), so a key
	// names one operation whoever sends it.
	ScopeGlobal = "global"
	// ScopeCustom: a scope function (WithScope) names the owner; replace it
	// with what the function keys by, such as ScopePrincipal.
	ScopeCustom = "custom"
	// ScopePrincipal: each authenticated principal (API key, user, tenant)
	// has keys of its own, and never replays another's answer.
	ScopePrincipal = "principal"
)

// The words of OpenAPIPolicy.StoreFailure.
const (
	// StoreFailClosed: when the store cannot be reached the request is
	// answered 503 with Retry-After and nothing runs (the default).
	StoreFailClosed = "closed"
	// StoreFailOpen: when the store cannot be reached the handler runs
	// unprotected (WithFailOpen).
	StoreFailOpen = "open"
)

// OpenAPIFragment is the Middleware's contract in OpenAPI 3.1 terms, made
// by OpenAPI. Its Policy is plain data; every other part of it is rendered
// from Policy when asked for, so a change to Policy shows in all of them.
// Marshalled with encoding/json it is a complete OpenAPI 3.1 document with
// components only (the file openapi.json beside this package is the one of
// the default options).
//
// Merge it into a spec by hand (copy the components, then give each
// protected operation the members of Operation), or in Go: add the members
// of each section of Components to the same section of your components,
// and to each protected operation the parameters and responses of
// Operation, its x-idempotency member, and ReplayedHeader in the headers of
// each response it stores (every status below 500 but 307, 308, 408 and 429). Where
// an operation has answers of its own with a status the Middleware also
// uses (400 or 503, say), list ProblemSchemas of that status beside its own
// schemas in an anyOf instead of taking the response of Operation.
//
// The zero value has a zero Policy: use OpenAPI. An OpenAPIFragment is safe
// for concurrent use as long as nobody changes Policy.
type OpenAPIFragment struct {
	// Policy is the x-idempotency object of every protected operation and
	// of the components.
	Policy OpenAPIPolicy
}

// OpenAPIPolicy is the x-idempotency object: the retention, scope,
// fingerprint and conflict rules of the operations that take an
// Idempotency-Key, in OpenAPI's camelCase. An operation that has one takes
// the key; the one under components is the default policy of the API. See
// "OpenAPI" in the package documentation for every member. The zero value
// describes nothing: use OpenAPI's. Like the other OpenAPIXxx types it is
// plain data, safe for concurrent use while nobody changes it.
type OpenAPIPolicy struct {
	// Version is OpenAPIPolicyVersion, the version of this object's form.
	Version int `json:"version"`
	// Header is the name of the request header carrying the key:
	// "Idempotency-Key".
	Header string `json:"header"`
	// Methods are the methods whose requests the Middleware protects
	// (WithMethods), sorted.
	Methods []string `json:"methods"`
	// KeyRequired reports whether a protected request without a key is
	// refused with 400 (WithKeyRequired) rather than run unprotected.
	KeyRequired bool `json:"keyRequired"`
	// MaxKeyLength is the longest key in bytes, after an sf-string is
	// unquoted: 255.
	MaxKeyLength int `json:"maxKeyLength"`
	// TTLSeconds is how long a key and its stored answer are kept (WithTTL);
	// after it the key is new again and a request with it runs anew.
	TTLSeconds float64 `json:"ttlSeconds"`
	// Scope says who owns a key.
	Scope OpenAPIScope `json:"scope"`
	// Fingerprint says what makes two requests with one key the same
	// request.
	Fingerprint OpenAPIFingerprint `json:"fingerprint"`
	// Replay says what is stored and how a replay is marked.
	Replay OpenAPIReplay `json:"replay"`
	// Conflict says how a key in progress and a key reused for another
	// request are answered.
	Conflict OpenAPIConflict `json:"conflict"`
	// StoreFailure is StoreFailClosed or StoreFailOpen.
	StoreFailure string `json:"storeFailure"`
}

// OpenAPIScope is the "scope" member of x-idempotency; plain data, as
// OpenAPIPolicy is: safe for concurrent use while nobody changes it.
type OpenAPIScope struct {
	// By names who owns a key: ScopeGlobal, ScopePrincipal, ScopeCustom, or
	// another word of the server's (such as "tenant").
	By string `json:"by"`
	// PerRoute reports whether each route has keys of its own. It is false
	// for the Middleware: the route is part of the fingerprint, so one key
	// sent to two routes is a mismatch (422), not two operations.
	PerRoute bool `json:"perRoute"`
	// Description says more, for a person; "" leaves it out.
	Description string `json:"description,omitempty"`
}

// OpenAPIFingerprint is the "fingerprint" member of x-idempotency; plain
// data, as OpenAPIPolicy is: safe for concurrent use while nobody changes
// it (its Covers included).
type OpenAPIFingerprint struct {
	// Version is the fingerprint recipe: "v1".
	Version string `json:"version"`
	// Covers are the parts of the request it digests: method, path, query
	// (parameters sorted by name), mediaType (the body's Content-Type,
	// application/json naming none) and body. No other header is among
	// them.
	Covers []string `json:"covers"`
	// JSONBody is "canonical": a JSON body (application/json or +json) is
	// compared with its members sorted and insignificant whitespace
	// dropped; any other body byte for byte.
	JSONBody string `json:"jsonBody"`
	// MaxBodyBytes is the largest body read (WithMaxRequestBody); a larger
	// one gets 413.
	MaxBodyBytes int64 `json:"maxBodyBytes"`
}

// OpenAPIReplay is the "replay" member of x-idempotency; plain data, as
// OpenAPIPolicy is: safe for concurrent use while nobody changes it (its
// NotStored and Headers included).
type OpenAPIReplay struct {
	// Header is set to "true" on a replayed answer: "Idempotent-Replayed".
	Header string `json:"header"`
	// StoredBelow and NotStored say which statuses are stored and replayed:
	// those below StoredBelow (500) but NotStored (307, 308, 408, 429). Any other
	// answer stores nothing, and a retry runs the operation again.
	StoredBelow int   `json:"storedBelow"`
	NotStored   []int `json:"notStored"`
	// Headers are the response headers stored and replayed (the
	// allow-list, with WithReplayHeaders), canonical and sorted.
	Headers []string `json:"headers"`
	// MaxBodyBytes is the largest response body stored
	// (WithMaxResponseBody); a larger one is sent once, and its retries get
	// OversizeStatus (410).
	MaxBodyBytes   int64 `json:"maxBodyBytes"`
	OversizeStatus int   `json:"oversizeStatus"`
}

// OpenAPIConflict is the "conflict" member of x-idempotency; plain data,
// as OpenAPIPolicy is: safe for concurrent use while nobody changes it.
type OpenAPIConflict struct {
	// InProgressStatus (409) answers a request whose key is in progress.
	InProgressStatus int `json:"inProgressStatus"`
	// RetryAfter reports that the in-progress answer carries Retry-After:
	// always true.
	RetryAfter bool `json:"retryAfter"`
	// WaitSeconds is how long such a request first waits for the running
	// one's answer, to replay it (WithWaitForResult); 0 answers at once.
	WaitSeconds float64 `json:"waitSeconds"`
	// MismatchStatus (422) answers a key sent again with another
	// fingerprint.
	MismatchStatus int `json:"mismatchStatus"`
}

// OpenAPIOperation is what a protected operation of a spec takes from the
// fragment (OpenAPIFragment.Operation); marshalled, its members are members
// of an Operation Object. The zero value has none. It is plain data, safe
// for concurrent use while nobody changes it.
type OpenAPIOperation struct {
	// Parameters holds a reference to the Idempotency-Key parameter.
	Parameters []json.RawMessage `json:"parameters"`
	// Responses holds, by status, a reference to each problem response of
	// the Middleware.
	Responses map[string]json.RawMessage `json:"responses"`
	// Policy is the x-idempotency member.
	Policy OpenAPIPolicy `json:"x-idempotency"`
}

// The names of the fragment's components. Each starts with Idempotency or
// Idempotent, so that they do not collide with a spec's own.
const (
	oaKeyParameter  = "IdempotencyKey"
	oaReplayed      = "IdempotentReplayed"
	oaRetryAfter    = "IdempotencyRetryAfter"
	oaProblem       = "IdempotencyProblem"
	oaPolicyMember  = "x-idempotency"
	oaResponsesStem = "Idempotency"
)

// oaProblemDoc is one problem type of the Middleware in the fragment.
type oaProblemDoc struct {
	typ, schema, description string
	status                   int
}

// oaProblems are the Middleware's problems, in the order of the package
// documentation's table.
var oaProblems = []oaProblemDoc{
	{ProblemMissingKey, "IdempotencyProblemMissingKey", "The method is protected, the key is required, and the request has none. Add a key and send again.", http.StatusBadRequest},
	{ProblemMalformedKey, "IdempotencyProblemMalformedKey", "The Idempotency-Key is empty, over 255 bytes, not printable ASCII, given several times, or a broken sf-string; detail says which. Nothing ran.", http.StatusBadRequest},
	{ProblemBodyUnreadable, "IdempotencyProblemBodyUnreadable", "The request body could not be read. Nothing ran.", http.StatusBadRequest},
	{ProblemRequestTimeout, "IdempotencyProblemRequestTimeout", "The request body did not arrive before the server stopped waiting for it. Nothing ran. Retry with the same key and body.", http.StatusRequestTimeout},
	{ProblemRequestTooLarge, "IdempotencyProblemRequestTooLarge", "The request body is over the limit (x-idempotency fingerprint.maxBodyBytes). Nothing ran.", http.StatusRequestEntityTooLarge},
	{ProblemKeyReused, "IdempotencyProblemKeyReused", "The key was used for a request with another fingerprint. Never retry with this key; a new operation takes a new key.", http.StatusUnprocessableEntity},
	{ProblemInProgress, "IdempotencyProblemInProgress", "A request with this key is still running. Retry after Retry-After with the same key and body.", http.StatusConflict},
	{ProblemResponseTooLarge, "IdempotencyProblemResponseTooLarge", "The operation completed, but its answer cannot be replayed: it was too large to store, or it was not sent whole (a body shorter than its Content-Length). original_status is its status. It will not run again.", http.StatusGone},
	{ProblemScopeUnavailable, "IdempotencyProblemScopeUnavailable", "The owner of the key could not be determined, so nothing ran.", http.StatusInternalServerError},
	{ProblemStoreUnavailable, "IdempotencyProblemStoreUnavailable", "The idempotency store could not be reached, so nothing ran. Retry after Retry-After with the same key.", http.StatusServiceUnavailable},
	{ProblemCommitFailed, "IdempotencyProblemCommitFailed", "The operation ran, but its transaction was not committed, or its commit was not confirmed. Retry with the same key: a committed operation is replayed, one rolled back runs again. When part of it was committed and recorded as completed but not replayable, detail says so, and a retry gets 410.", http.StatusServiceUnavailable},
}

// answers reports whether the Middleware with policy p may answer with
// the problem d.
func (p OpenAPIPolicy) answers(d oaProblemDoc) bool {
	switch d.typ {
	case ProblemMissingKey:
		return p.KeyRequired
	case ProblemScopeUnavailable:
		return p.Scope.By != ScopeGlobal
	}
	return true
}

// oaResponse describes the problem response of one status.
var oaResponses = map[int]struct{ name, description string }{
	http.StatusBadRequest:            {"BadRequest", "The Idempotency-Key is missing (when required) or malformed, or the body could not be read. Nothing ran; do not retry as it is."},
	http.StatusRequestTimeout:        {"RequestTimeout", "The request body did not arrive before the server stopped waiting for it. Nothing ran. Retry with the same key and body."},
	http.StatusConflict:              {"InProgress", "A request with this Idempotency-Key is still running. Retry after Retry-After with the same key and body."},
	http.StatusGone:                  {"ResponseTooLarge", "The operation completed, but its answer cannot be replayed: it was too large to store, or it was not sent whole. It will not run again."},
	http.StatusRequestEntityTooLarge: {"RequestTooLarge", "The request body is over the limit. Nothing ran."},
	http.StatusUnprocessableEntity:   {"KeyReused", "The Idempotency-Key was used for a different request. Never retry with this key."},
	http.StatusInternalServerError:   {"ScopeUnavailable", "The owner of the key could not be determined. Nothing ran."},
	http.StatusServiceUnavailable:    {"Unavailable", "The idempotency store could not be reached, or the transaction could not be committed: nothing ran or nothing was kept (unless detail says that part of it was, and retries get 410). Retry after Retry-After with the same key."},
}

func oaRef(section, name string) json.RawMessage {
	return oaJSON(map[string]string{"$ref": "#/components/" + section + "/" + name})
}

// oaJSON is v in JSON, with no HTML escapes, since a document is read by
// people too (the key pattern holds an &).
func oaJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // the values of this file always marshal
		panic("idempotency: OpenAPI: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// statuses are the statuses of the problems the policy's Middleware may
// answer with, ascending.
func (f *OpenAPIFragment) statuses() []int {
	var ss []int
	for _, d := range oaProblems {
		if f.Policy.answers(d) && !slices.Contains(ss, d.status) {
			ss = append(ss, d.status)
		}
	}
	slices.Sort(ss)
	return ss
}

// ProblemSchemas returns references to the schemas of the problems the
// Middleware may answer with status, for an anyOf beside an operation's
// own schemas of that status; none when it never answers with it.
func (f *OpenAPIFragment) ProblemSchemas(status int) []json.RawMessage {
	var refs []json.RawMessage
	for _, d := range oaProblems {
		if d.status == status && f.Policy.answers(d) {
			refs = append(refs, oaRef("schemas", d.schema))
		}
	}
	return refs
}

// ReplayedHeader returns a reference to the Idempotent-Replayed header,
// for the headers of each response an operation's handler may answer
// with that the Middleware stores.
func (f *OpenAPIFragment) ReplayedHeader() json.RawMessage { return oaRef("headers", oaReplayed) }

// Operation returns the members a protected operation takes: the key
// parameter, the problem responses and x-idempotency.
func (f *OpenAPIFragment) Operation() OpenAPIOperation {
	op := OpenAPIOperation{
		Parameters: []json.RawMessage{oaRef("parameters", oaKeyParameter)},
		Responses:  make(map[string]json.RawMessage),
		Policy:     f.Policy,
	}
	for _, s := range f.statuses() {
		op.Responses[strconv.Itoa(s)] = oaRef("responses", oaResponsesStem+oaResponses[s].name)
	}
	return op
}

// Components returns the fragment's components by section of an OpenAPI
// Components Object (parameters, headers, schemas, responses) and name,
// each a JSON object.
func (f *OpenAPIFragment) Components() map[string]map[string]json.RawMessage {
	return map[string]map[string]json.RawMessage{
		"parameters": {oaKeyParameter: oaKeyParameterObject(f.Policy.KeyRequired)},
		"headers":    oaHeaders(),
		"schemas":    oaSchemas(),
		"responses":  f.problemResponses(),
	}
}

// oaObj is a JSON object of a component being built.
type oaObj = map[string]any

// oaKeyParameterObject is the Idempotency-Key header parameter, required
// or not.
func oaKeyParameterObject(required bool) json.RawMessage {
	desc := "Names one logical operation: every attempt of it carries the same key and the same body. A raw token or an RFC 9651 sf-string, 1 to " +
		strconv.Itoa(contract.MaxKeyLen) + " bytes of printable ASCII after unquoting, given once; a UUIDv4 is a good key. "
	if required {
		desc += "Required: a request without it gets 400."
	} else {
		desc += "Optional: a request without it runs unprotected, and is not safe to retry."
	}
	return oaJSON(oaObj{
		"name":        HeaderIdempotencyKey,
		"in":          "header",
		"required":    required,
		"description": desc,
		"schema":      oaObj{"type": "string", "pattern": contract.KeyPattern},
		"examples":    oaObj{"uuid": oaObj{"value": "8e03978e-40d5-43e8-bc93-6894a57f9324"}},
	})
}

// oaHeaders are the header components: Idempotent-Replayed and
// Retry-After.
func oaHeaders() map[string]json.RawMessage {
	return map[string]json.RawMessage{
		oaReplayed: oaJSON(oaObj{
			"description": `"true" on an answer replayed from the record of the operation instead of running it again; absent on the first answer.`,
			"schema":      oaObj{"type": "string", "const": "true"},
		}),
		oaRetryAfter: oaJSON(oaObj{
			"required":    true,
			"description": "Whole seconds to wait before retrying with the same key and body (for 409, when the running request is expected to be done).",
			"schema":      oaObj{"type": "integer", "minimum": 1},
		}),
	}
}

// oaSchemas are the schema components: the problem document, and one
// schema per problem type (every one of oaProblems, whatever the policy).
func oaSchemas() map[string]json.RawMessage {
	schemas := map[string]json.RawMessage{
		oaProblem: oaJSON(oaObj{
			"type":        "object",
			"description": "An RFC 9457 problem document, as the idempotency middleware answers its errors with.",
			"required":    []string{"type", "title", "status"},
			"properties": oaObj{
				"type":            oaObj{"type": "string", "format": "uri-reference", "description": "Stable URI of the condition; match on it."},
				"title":           oaObj{"type": "string"},
				"status":          oaObj{"type": "integer", "minimum": 100, "maximum": 599},
				"detail":          oaObj{"type": "string"},
				"instance":        oaObj{"type": "string", "format": "uri-reference"},
				"idempotency_key": oaObj{"type": "string", "description": "The request's Idempotency-Key, as parsed, when it was."},
				"original_status": oaObj{"type": "integer", "description": "The status the operation completed with (410 only)."},
			},
		}),
	}
	for _, d := range oaProblems {
		schemas[d.schema] = oaJSON(oaObj{
			"description": d.description,
			"allOf":       []any{oaRef("schemas", oaProblem)},
			"properties":  oaObj{"type": oaObj{"const": d.typ}, "status": oaObj{"const": d.status}},
		})
	}
	return schemas
}

// problemResponses are the response components: one per status the
// policy's Middleware may answer with a problem.
func (f *OpenAPIFragment) problemResponses() map[string]json.RawMessage {
	responses := map[string]json.RawMessage{}
	for _, s := range f.statuses() {
		r := oaResponses[s]
		schemas := f.ProblemSchemas(s)
		var schema any = schemas[0]
		if len(schemas) > 1 {
			schema = oaObj{"anyOf": schemas}
		}
		resp := oaObj{
			"description": r.description,
			"content":     oaObj{contract.ContentTypeProblem: oaObj{"schema": schema}},
		}
		if h := oaProblemHeaders(s); len(h) > 0 {
			resp["headers"] = h
		}
		responses[oaResponsesStem+r.name] = oaJSON(resp)
	}
	return responses
}

// oaProblemHeaders are the headers of the problem response of status:
// Retry-After with 409 and 503, Idempotent-Replayed with 410.
func oaProblemHeaders(status int) oaObj {
	h := oaObj{}
	switch status {
	case http.StatusConflict, http.StatusServiceUnavailable:
		h["Retry-After"] = oaRef("headers", oaRetryAfter)
	case http.StatusGone:
		h[HeaderReplayed] = oaObj{"required": true, "description": "The answer comes from the record of the operation.",
			"schema": oaObj{"type": "string", "const": "true"}}
	}
	return h
}

// MarshalJSON renders the fragment as a complete OpenAPI 3.1 document with
// components only, Policy as the components' x-idempotency member.
func (f *OpenAPIFragment) MarshalJSON() ([]byte, error) {
	comps := map[string]any{oaPolicyMember: f.Policy}
	for section, objs := range f.Components() {
		comps[section] = objs
	}
	return oaJSON(map[string]any{
		"openapi": OpenAPIVersion,
		"info": map[string]string{
			"title":   "saferetry idempotency contract",
			"version": strconv.Itoa(OpenAPIPolicyVersion),
			"summary": "The Idempotency-Key parameter, the replay and retry headers, the problem responses and the x-idempotency policy of github.com/saferetry/saferetry/idempotency, to merge into an API's own document.",
		},
		"components": comps,
	}), nil
}

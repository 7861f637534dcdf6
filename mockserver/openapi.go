package mockserver

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/contract"
)

// OpenAPIPath is where the server serves its OpenAPI 3.1 description (GET
// and HEAD), the one OpenAPI returns. Injected latency does not apply to it.
const OpenAPIPath = "/openapi.json"

// OpenAPI returns the server's OpenAPI 3.1 description, in JSON: the
// payments API (POST /payments behind the idempotency Middleware, GET
// /payments, GET /payments/{id}, GET /balance) and OpenAPIPath itself,
// with the idempotency package's fragment (idempotency.OpenAPI) for the
// Idempotency-Key parameter, the problem responses and the x-idempotency
// policy of POST /payments, which follows the server's options (the TTL
// and wait of WithIdempotencyOptions, for instance). The admin API and
// MetricsPath are not part of it. Each call returns a copy of its own. It
// is safe for concurrent use.
func (s *Server) OpenAPI() []byte { return slices.Clone(s.openapi) }

// openAPIDocument builds the description of a server whose POST
// /payments runs behind an idempotency Middleware with idemOpts.
func openAPIDocument(idemOpts []idempotency.Option) []byte {
	frag := idempotency.OpenAPI(idemOpts...)
	frag.Policy.Scope = idempotency.OpenAPIScope{By: idempotency.ScopeGlobal,
		Description: "Every client of the server shares one scope, its namespace (WithNamespace); ExpireKeys starts a new one, so every key seen before is new again."}
	return mustJSON(oaObj{
		"openapi":    idempotency.OpenAPIVersion,
		"info":       oaInfo(),
		"paths":      oaPaths(frag),
		"components": oaComponents(frag),
	})
}

// oaObj is a JSON object of the document being built.
type oaObj = map[string]any

// oaRef is a reference to the schema component name.
func oaRef(name string) json.RawMessage {
	return json.RawMessage(`{"$ref":"#/components/schemas/` + name + `"}`)
}

// oaProblemContent is the problem content of a response whose body is
// one of schemas.
func oaProblemContent(schemas ...json.RawMessage) oaObj {
	var schema any = schemas[0]
	if len(schemas) > 1 {
		schema = oaObj{"anyOf": schemas}
	}
	return oaObj{contract.ContentTypeProblem: oaObj{"schema": schema}}
}

// oaInfo is the document's Info Object.
func oaInfo() oaObj {
	return oaObj{
		"title":   "saferetry mock payments API",
		"version": "1",
		"description": "The reference payments server of github.com/saferetry/saferetry/mockserver. POST /payments takes an Idempotency-Key (x-idempotency says how); " +
			"every answer below 500 but 307, 308, 408 and 429 is stored and replayed for its key with Idempotent-Replayed: true, except a 415 to a body declared as another media type than JSON, answered before the key is claimed (to a key of which the store holds no record; a retry of a key that has one is answered from it), and a failure injected through the admin API, which may have any status from 400 to 599; neither is ever stored. Every GET path answers HEAD too; " +
			"a method a path does not allow gets 405 with Allow, an unknown path 404, both as problems. The admin API under /_mock/ (fault injection, inspection) is described in the package documentation, not here.",
	}
}

// oaPaths is the document's Paths Object: the payments API and
// OpenAPIPath.
func oaPaths(frag *idempotency.OpenAPIFragment) oaObj {
	return oaObj{
		"/payments":      oaObj{"post": oaCreatePayment(frag), "get": oaListPayments()},
		"/payments/{id}": oaObj{"get": oaGetPayment()},
		"/balance":       oaObj{"get": oaGetBalance()},
		OpenAPIPath: oaObj{
			"get": oaObj{
				"operationId": "getOpenAPI",
				"summary":     "This document.",
				"responses": oaObj{"200": oaObj{"description": "The server's OpenAPI 3.1 description.",
					"content": oaObj{"application/json": oaObj{"schema": oaObj{"type": "object", "required": []string{"openapi"}}}}}},
			},
		},
	}
}

// oaCreatePayment is the operation POST /payments, behind the idempotency
// Middleware the fragment describes.
func oaCreatePayment(frag *idempotency.OpenAPIFragment) oaObj {
	op := frag.Operation()
	body := oaObj{"required": true, "content": oaObj{"application/json": oaObj{"schema": oaRef("PaymentRequest")}},
		"description": "JSON in UTF-8: application/json, in any case, with charset=utf-8 or without a charset, or an application/*+json type (application/vnd.api+json; not a media range such as application/*+json itself, nor application/+json); a body without Content-Type is read as JSON too. Any other Content-Type, and a Content-Encoding other than identity, is refused with 415. A UTF-8 byte order mark before the JSON is ignored (RFC 8259, section 8.1); a body that is not UTF-8 is refused with 400."}
	return oaObj{
		"operationId":   "createPayment",
		"summary":       "Execute a payment, once per Idempotency-Key.",
		"parameters":    op.Parameters,
		"requestBody":   body,
		"responses":     oaCreatePaymentResponses(frag, op),
		"x-idempotency": op.Policy,
	}
}

// oaCreatePaymentResponses are the responses of POST /payments: the
// fragment's problem responses (op's), with the server's own answers of
// the same statuses beside the Middleware's.
func oaCreatePaymentResponses(frag *idempotency.OpenAPIFragment, op idempotency.OpenAPIOperation) oaObj {
	replayed := oaObj{idempotency.HeaderReplayed: frag.ReplayedHeader()}
	create := oaObj{}
	for status, r := range op.Responses {
		create[status] = r
	}
	create["201"] = oaObj{
		"description": "The payment executed; a retry with the same key and body gets the same answer with Idempotent-Replayed: true.",
		"headers": oaObj{"Location": oaObj{"required": true, "description": "The payment's URL path.", "schema": oaObj{"type": "string", "pattern": "^/payments/pay_[0-9a-f]{16}$"}},
			idempotency.HeaderReplayed: frag.ReplayedHeader()},
		"content": oaObj{"application/json": oaObj{"schema": oaRef("Payment")}},
	}
	// The Middleware answers 409 whatever the policy, to a body the mock
	// refuses too, of a key in progress (see requireJSON).
	conflict := oaResolve(op.Responses["409"], frag.Components()["responses"])
	conflict["description"] = conflict["description"].(string) + " Also answered to a body that would be refused with 415 whose key's request is running, as to any retry (its claim never taken over, even when its lease lapsed): nothing ran or was stored; its retry after Retry-After is answered from the key's record (the stored answer replayed, or 422 for another fingerprint)."
	create["409"] = conflict
	create["400"] = oaObj{
		"description": "The body is not a valid payment (stored and replayed for the key, like any answer below 500), or the Idempotency-Key is missing or malformed, or the body could not be read.",
		"headers":     replayed,
		"content":     oaProblemContent(append(frag.ProblemSchemas(http.StatusBadRequest), oaRef("MockProblemValidation"))...),
	}
	create["415"] = oaObj{
		"description": "The body is declared as another media type than JSON in UTF-8 (a form, text/plain, a charset other than utf-8, a Content-Type that does not parse or is given twice), or has a content coding (Content-Encoding: gzip). Answered only to a request with a valid Idempotency-Key of which the store holds no record, before the key is claimed: this request was not run and its answer is not stored, and the key paid nothing. A missing or malformed key gets 400 instead, a retry of a key that executed or is running is answered from its record, as any retry, without taking its claim over: the stored answer replayed, 422 for another fingerprint, 409 in progress (or 503 MockProblemKeyChanged when the record went away meanwhile, or, the store not reached at first, turns out not to be there).",
		"headers": oaObj{
			"Accept":          oaObj{"description": "With a refused media type: the one taken, application/json (RFC 9110, section 15.5.16).", "schema": oaObj{"const": acceptedMediaType}},
			"Accept-Encoding": oaObj{"description": "With a refused content coding: the one taken, identity (RFC 9110, section 15.5.16).", "schema": oaObj{"const": "identity"}},
		},
		"content": oaProblemContent(oaRef("MockProblemUnsupportedMediaType")),
	}
	create["402"] = oaObj{
		"description": "The amount exceeds the balance of its currency; stored and replayed for the key.",
		"headers":     replayed,
		"content":     oaProblemContent(oaRef("MockProblemInsufficientFunds")),
	}
	create["503"] = oaObj{
		"description": "Nothing stored: the idempotency store or the ledger was unavailable, or the client left during an injected delay, or a body refused with 415 was to be answered from its key's record, which went away meanwhile, or, the store not reached at first, turned out not to be there (MockProblemKeyChanged). Nothing was paid, unless a ledger's answer was lost after its write; retry with the same key, which pays nothing twice.",
		"headers":     oaObj{"Retry-After": oaObj{"description": "Seconds to wait; sent with the idempotency Middleware's 503s and MockProblemKeyChanged.", "schema": oaObj{"type": "integer", "minimum": 1}}},
		"content": oaProblemContent(append(frag.ProblemSchemas(http.StatusServiceUnavailable),
			oaRef("MockProblemLedgerUnavailable"), oaRef("MockProblemAborted"), oaRef("MockProblemKeyChanged"))...),
	}
	return oaWithInjected(frag, create)
}

// oaInjectedDescription says, in the description of each response of
// POST /payments, that a failure may be injected with its status.
const oaInjectedDescription = "Or a failure injected with this status (FailNext, POST /_mock/fail) before anything ran: a MockProblemInjectedFailure without Retry-After or Idempotent-Replayed; nothing stored, nothing paid."

// oaWithInjected returns the responses of POST /payments with the
// failures that FailNext injects, which may have any status from 400 to
// 599, described beside them: MockProblemInjectedFailure joins the
// problem schemas of each 4xx and 5xx response, whose required headers
// (the Middleware's Retry-After with 409, Idempotent-Replayed with 410)
// turn optional, since an injected failure carries none of them; and the
// ranges 4XX and 5XX describe the statuses that nothing else answers.
// The fragment's responses, references to its components, are copied
// whole for the purpose: the components stay as the fragment has them.
func oaWithInjected(frag *idempotency.OpenAPIFragment, responses oaObj) oaObj {
	comps := frag.Components()
	out := oaObj{}
	for status, r := range responses {
		if n, err := strconv.Atoi(status); err != nil || n < 400 || n > 599 {
			out[status] = r
			continue
		}
		resp := oaResolve(mustJSON(r), comps["responses"])
		content := resp["content"].(oaObj)[contract.ContentTypeProblem].(oaObj)
		schemas := []any{content["schema"]}
		if list, ok := content["schema"].(oaObj)["anyOf"].([]any); ok {
			schemas = list
		}
		content["schema"] = oaObj{"anyOf": append(schemas, oaRef("MockProblemInjectedFailure"))}
		if headers, ok := resp["headers"].(oaObj); ok {
			for name, h := range headers {
				if h := oaResolve(mustJSON(h), comps["headers"]); h["required"] == true {
					delete(h, "required")
					headers[name] = h
				}
			}
		}
		resp["description"] = resp["description"].(string) + " " + oaInjectedDescription
		out[status] = resp
	}
	injected := oaObj{
		"description": "A failure injected with this status (FailNext, POST /_mock/fail, which may choose any status from 400 to 599) before anything ran: nothing stored, nothing paid.",
		"content":     oaProblemContent(oaRef("MockProblemInjectedFailure")),
	}
	out["4XX"], out["5XX"] = injected, injected
	return out
}

// oaResolve decodes the JSON object raw, or the component of comps that
// it references ({"$ref": "#/components/SECTION/NAME"}), as a fresh
// oaObj of its own.
func oaResolve(raw json.RawMessage, comps map[string]json.RawMessage) oaObj {
	var o oaObj
	if err := json.Unmarshal(raw, &o); err != nil { // raw is mustJSON's
		panic("mockserver: OpenAPI: " + err.Error())
	}
	if ref, ok := o["$ref"].(string); ok {
		return oaResolve(comps[ref[strings.LastIndexByte(ref, '/')+1:]], comps)
	}
	return o
}

// oaLedgerDown is the 503 response of the reads.
func oaLedgerDown() oaObj {
	return oaObj{"description": "The ledger could not be read.", "content": oaProblemContent(oaRef("MockProblemLedgerUnavailable"))}
}

// oaListPayments is the operation GET /payments.
func oaListPayments() oaObj {
	return oaObj{
		"operationId": "listPayments",
		"summary":     "Every executed payment, oldest first.",
		"responses": oaObj{
			"200": oaObj{"description": "The payments.", "content": oaObj{"application/json": oaObj{"schema": oaObj{"type": "array", "items": oaRef("Payment")}}}},
			"503": oaLedgerDown(),
		},
	}
}

// oaGetPayment is the operation GET /payments/{id}.
func oaGetPayment() oaObj {
	return oaObj{
		"operationId": "getPayment",
		"parameters":  []any{oaObj{"name": "id", "in": "path", "required": true, "schema": oaObj{"type": "string"}}},
		"responses": oaObj{
			"200": oaObj{"description": "The payment.", "content": oaObj{"application/json": oaObj{"schema": oaRef("Payment")}}},
			"404": oaObj{"description": "No such payment.", "content": oaProblemContent(oaRef("MockProblemNotFound"))},
			"503": oaLedgerDown(),
		},
	}
}

// oaGetBalance is the operation GET /balance.
func oaGetBalance() oaObj {
	currency := oaObj{"type": "string", "pattern": "^[A-Za-z]{3}$"}
	return oaObj{
		"operationId": "getBalance",
		"summary":     "The balance of every currency set or used so far, or of one.",
		"parameters":  []any{oaObj{"name": "currency", "in": "query", "schema": currency}},
		"responses": oaObj{
			"200": oaObj{"description": "The balances, in minor units.", "content": oaObj{"application/json": oaObj{"schema": oaRef("Balances")}}},
			"400": oaObj{"description": "The currency is not three letters.", "content": oaProblemContent(oaRef("MockProblemValidation"))},
			"503": oaLedgerDown(),
		},
	}
}

// oaComponents is the document's Components Object: the fragment's
// components, the server's own schemas beside its schemas, and the
// fragment's policy as x-idempotency.
func oaComponents(frag *idempotency.OpenAPIFragment) oaObj {
	comps := oaObj{}
	for section, objs := range frag.Components() {
		sec := oaObj{}
		for name, o := range objs {
			sec[name] = o
		}
		comps[section] = sec
	}
	maps.Copy(comps["schemas"].(oaObj), oaPaymentSchemas())
	maps.Copy(comps["schemas"].(oaObj), oaProblemSchemas())
	comps["x-idempotency"] = frag.Policy
	return comps
}

// oaPaymentSchemas are the schemas of the payments API's bodies.
func oaPaymentSchemas() oaObj {
	return oaObj{
		"PaymentRequest": oaObj{
			"type": "object", "required": []string{"amount", "currency", "recipient"},
			"description": "A payment to make. Every member is given once: one given twice, amount, currency, recipient or another, is refused with 400, as JSON parsers differ on which value they take. Member names are case-sensitive: a member named amount, currency or recipient in another case (\"Amount\"), whether the exact name is given too or not, is refused with 400 naming it, as a parser that ignores case (encoding/json into a struct, .NET's by default) takes it for that member; names are folded as encoding/json folds them (the Kelvin sign is a k, the long s an s). Other members are ignored; so are the members of nested values, repeated or not.",
			"properties": oaObj{
				"amount":    oaObj{"type": "integer", "minimum": 1, "maximum": int64(1<<63 - 1), "description": "In minor units of currency, written as an integer: 1250.0 and 1.25e3, integers by JSON Schema, are refused with 400."},
				"currency":  oaObj{"type": "string", "pattern": "^[A-Za-z]{3}$", "description": "Three letters, in any case."},
				"recipient": oaObj{"type": "string", "pattern": `^[^\x00]*[^\s\x00][^\x00]*$`, "description": "Not blank; no U+0000."},
			},
			"examples": []any{oaObj{"amount": 1250, "currency": "EUR", "recipient": "alice"}},
		},
		"Payment": oaObj{
			"type": "object", "additionalProperties": false,
			"required": []string{"id", "amount", "currency", "recipient", "status", "idempotency_key", "ref", "created"},
			"properties": oaObj{
				"id":              oaObj{"type": "string", "pattern": "^pay_[0-9a-f]{16}$"},
				"amount":          oaObj{"type": "integer", "minimum": 1},
				"currency":        oaObj{"type": "string", "pattern": "^[A-Z]{3}$"},
				"recipient":       oaObj{"type": "string"},
				"status":          oaObj{"const": "succeeded"},
				"idempotency_key": oaObj{"type": "string", "description": "The key of the request that created the payment."},
				"ref":             oaObj{"type": "string", "description": "What the ledger keys the payment by: the request's idempotency.DerivedKey, the same on every execution of the operation."},
				"created":         oaObj{"type": "string", "format": "date-time"},
			},
		},
		"Balances": oaObj{
			"type": "object", "additionalProperties": false, "required": []string{"balances"},
			"properties": oaObj{"balances": oaObj{
				"type": "object", "propertyNames": oaObj{"pattern": "^[A-Z]{3}$"}, "additionalProperties": oaObj{"type": "integer"},
				"description": "Balance by currency, in minor units.",
			}},
		},
		"FieldError": oaObj{
			"type": "object", "additionalProperties": false, "required": []string{"field", "detail"},
			"properties": oaObj{"field": oaObj{"type": "string", "description": `The member at fault, named as in the body (a member named amount in another case, "Amount", is named so); "" is the body as a whole.`}, "detail": oaObj{"type": "string"}},
		},
	}
}

// oaProblemSchemas are the schemas of the server's own problem documents:
// MockProblem, and one per problem type.
func oaProblemSchemas() oaObj {
	problem := func(typ string, status int, desc string, extra oaObj) json.RawMessage {
		props := oaObj{"type": oaObj{"const": typ}, "status": oaObj{"const": status}}
		maps.Copy(props, extra)
		return mustJSON(oaObj{"description": desc, "allOf": []any{oaRef("MockProblem")}, "properties": props})
	}
	return oaObj{
		"MockProblem": oaObj{
			"type": "object", "required": []string{"type", "title", "status"},
			"description": "An RFC 9457 problem document of the mock server itself.",
			"properties": oaObj{
				"type":   oaObj{"type": "string", "format": "uri-reference"},
				"title":  oaObj{"type": "string"},
				"status": oaObj{"type": "integer", "minimum": 100, "maximum": 599},
				"detail": oaObj{"type": "string"},
				"errors": oaObj{"type": "array", "items": oaRef("FieldError")},
			},
		},
		"MockProblemValidation":        problem(ProblemValidation, 400, "The payment request (or the currency of GET /balance) is invalid; errors lists every bad field.", oaObj{"errors": oaObj{"type": "array", "minItems": 1, "items": oaRef("FieldError")}}),
		"MockProblemInsufficientFunds": problem(ProblemInsufficientFunds, 402, "The amount exceeds the balance of its currency.", nil),
		"MockProblemNotFound":          problem(ProblemNotFound, 404, "No such payment (or path).", nil),
		"MockProblemLedgerUnavailable": problem(ProblemLedgerUnavailable, 503, "The ledger could not be read or written: nothing was paid, or its answer was lost after the payment. A retry with the same key finds such a payment and pays nothing twice.", nil),
		"MockProblemAborted":           problem(ProblemAborted, 503, "The client went away during an injected delay; the payment did not run.", nil),
		"MockProblemInjectedFailure": mustJSON(oaObj{"description": "A failure injected before anything ran (any status from 400 to 599).",
			"allOf": []any{oaRef("MockProblem")}, "properties": oaObj{"type": oaObj{"const": ProblemInjectedFailure}, "status": oaObj{"minimum": 400, "maximum": 599}}}),
		"MockProblemUnsupportedMediaType": problem(ProblemUnsupportedMediaType, 415, "The payment body is declared as another media type than JSON in UTF-8, or has a content coding; detail says which. Answered to a key of which the store holds no record; never stored.", nil),
		"MockProblemKeyChanged":           problem(ProblemKeyChanged, 503, "A body that would be refused with 415 was to be answered from its key's record, which went away before the key was claimed (it expired, or the request that held it failed), or which the store, not reached on the first lookup, turned out not to hold (there may never have been one; the detail says which); nothing was paid or stored. A retry with the same key is answered 415, or from the key's record if it has one by then.", nil),
	}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil { // the documents of this file always marshal
		panic("mockserver: OpenAPI: " + err.Error())
	}
	return b
}

// serveOpenAPI answers GET OpenAPIPath.
func (s *Server) serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(s.openapi)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.openapi)
}

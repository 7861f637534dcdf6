package mockserver

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"

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
	type obj = map[string]any
	frag := idempotency.OpenAPI(idemOpts...)
	frag.Policy.Scope = idempotency.OpenAPIScope{By: idempotency.ScopeGlobal,
		Description: "Every client of the server shares one scope, its namespace (WithNamespace); ExpireKeys starts a new one, so every key seen before is new again."}
	op := frag.Operation()

	ref := func(name string) json.RawMessage {
		return json.RawMessage(`{"$ref":"#/components/schemas/` + name + `"}`)
	}
	problem := func(typ string, status int, desc string, extra obj) json.RawMessage {
		props := obj{"type": obj{"const": typ}, "status": obj{"const": status}}
		maps.Copy(props, extra)
		return mustJSON(obj{"description": desc, "allOf": []any{ref("MockProblem")}, "properties": props})
	}
	problemContent := func(schemas ...json.RawMessage) obj {
		var schema any = schemas[0]
		if len(schemas) > 1 {
			schema = obj{"anyOf": schemas}
		}
		return obj{contract.ContentTypeProblem: obj{"schema": schema}}
	}
	replayed := obj{idempotency.HeaderReplayed: frag.ReplayedHeader()}
	ledgerDown := obj{"description": "The ledger could not be read.", "content": problemContent(ref("MockProblemLedgerUnavailable"))}

	// POST /payments: the fragment's problem responses, with the server's
	// own answers of the same statuses beside the Middleware's.
	create := obj{}
	for status, r := range op.Responses {
		create[status] = r
	}
	create["201"] = obj{
		"description": "The payment executed; a retry with the same key and body gets the same answer with Idempotent-Replayed: true.",
		"headers": obj{"Location": obj{"required": true, "description": "The payment's URL path.", "schema": obj{"type": "string", "pattern": "^/payments/pay_[0-9a-f]{16}$"}},
			idempotency.HeaderReplayed: frag.ReplayedHeader()},
		"content": obj{"application/json": obj{"schema": ref("Payment")}},
	}
	create["400"] = obj{
		"description": "The body is not a valid payment (stored and replayed for the key, like any answer below 500), or the Idempotency-Key is missing or malformed, or the body could not be read.",
		"headers":     replayed,
		"content":     problemContent(append(frag.ProblemSchemas(http.StatusBadRequest), ref("MockProblemValidation"))...),
	}
	create["402"] = obj{
		"description": "The amount exceeds the balance of its currency; stored and replayed for the key.",
		"headers":     replayed,
		"content":     problemContent(ref("MockProblemInsufficientFunds")),
	}
	create["503"] = obj{
		"description": "Nothing was paid and nothing stored: the idempotency store or the ledger was unavailable, the client left during an injected delay, or a failure was injected (FailNext, POST /_mock/fail, which may choose any status from 400 to 599). Retry with the same key.",
		"headers":     obj{"Retry-After": obj{"description": "Seconds to wait; sent with the idempotency Middleware's 503s.", "schema": obj{"type": "integer", "minimum": 1}}},
		"content": problemContent(append(frag.ProblemSchemas(http.StatusServiceUnavailable),
			ref("MockProblemLedgerUnavailable"), ref("MockProblemAborted"), ref("MockProblemInjectedFailure"))...),
	}

	currency := obj{"type": "string", "pattern": "^[A-Za-z]{3}$"}
	schemas := obj{
		"PaymentRequest": obj{
			"type": "object", "required": []string{"amount", "currency", "recipient"},
			"description": "A payment to make. Other members are ignored.",
			"properties": obj{
				"amount":    obj{"type": "integer", "minimum": 1, "maximum": int64(1<<63 - 1), "description": "In minor units of currency."},
				"currency":  obj{"type": "string", "pattern": "^[A-Za-z]{3}$", "description": "Three letters, in any case."},
				"recipient": obj{"type": "string", "pattern": `\S`, "description": "Not blank."},
			},
			"examples": []any{obj{"amount": 1250, "currency": "EUR", "recipient": "alice"}},
		},
		"Payment": obj{
			"type": "object", "additionalProperties": false,
			"required": []string{"id", "amount", "currency", "recipient", "status", "idempotency_key", "ref", "created"},
			"properties": obj{
				"id":              obj{"type": "string", "pattern": "^pay_[0-9a-f]{16}$"},
				"amount":          obj{"type": "integer", "minimum": 1},
				"currency":        obj{"type": "string", "pattern": "^[A-Z]{3}$"},
				"recipient":       obj{"type": "string"},
				"status":          obj{"const": "succeeded"},
				"idempotency_key": obj{"type": "string", "description": "The key of the request that created the payment."},
				"ref":             obj{"type": "string", "description": "What the ledger keys the payment by: the request's idempotency.DerivedKey, the same on every execution of the operation."},
				"created":         obj{"type": "string", "format": "date-time"},
			},
		},
		"Balances": obj{
			"type": "object", "additionalProperties": false, "required": []string{"balances"},
			"properties": obj{"balances": obj{
				"type": "object", "propertyNames": obj{"pattern": "^[A-Z]{3}$"}, "additionalProperties": obj{"type": "integer"},
				"description": "Balance by currency, in minor units.",
			}},
		},
		"FieldError": obj{
			"type": "object", "additionalProperties": false, "required": []string{"field", "detail"},
			"properties": obj{"field": obj{"type": "string", "description": `The member at fault; "" is the body as a whole.`}, "detail": obj{"type": "string"}},
		},
		"MockProblem": obj{
			"type": "object", "required": []string{"type", "title", "status"},
			"description": "An RFC 9457 problem document of the mock server itself.",
			"properties": obj{
				"type":   obj{"type": "string", "format": "uri-reference"},
				"title":  obj{"type": "string"},
				"status": obj{"type": "integer", "minimum": 100, "maximum": 599},
				"detail": obj{"type": "string"},
				"errors": obj{"type": "array", "items": ref("FieldError")},
			},
		},
		"MockProblemValidation":        problem(ProblemValidation, 400, "The payment request (or the currency of GET /balance) is invalid; errors lists every bad field.", obj{"errors": obj{"type": "array", "minItems": 1, "items": ref("FieldError")}}),
		"MockProblemInsufficientFunds": problem(ProblemInsufficientFunds, 402, "The amount exceeds the balance of its currency.", nil),
		"MockProblemNotFound":          problem(ProblemNotFound, 404, "No such payment (or path).", nil),
		"MockProblemLedgerUnavailable": problem(ProblemLedgerUnavailable, 503, "The ledger could not be read or written; nothing was paid.", nil),
		"MockProblemAborted":           problem(ProblemAborted, 503, "The client went away during an injected delay; the payment did not run.", nil),
		"MockProblemInjectedFailure": mustJSON(obj{"description": "A failure injected before anything ran (any status from 400 to 599).",
			"allOf": []any{ref("MockProblem")}, "properties": obj{"type": obj{"const": ProblemInjectedFailure}, "status": obj{"minimum": 400, "maximum": 599}}}),
	}
	comps := obj{}
	for section, objs := range frag.Components() {
		sec := obj{}
		for name, o := range objs {
			sec[name] = o
		}
		comps[section] = sec
	}
	maps.Copy(comps["schemas"].(obj), schemas)
	comps["x-idempotency"] = frag.Policy

	doc := obj{
		"openapi": idempotency.OpenAPIVersion,
		"info": obj{
			"title":   "saferetry mock payments API",
			"version": "1",
			"description": "The reference payments server of github.com/saferetry/saferetry/mockserver. POST /payments takes an Idempotency-Key (x-idempotency says how); " +
				"every answer below 500 but 408 and 429 is stored and replayed for its key with Idempotent-Replayed: true. Every GET path answers HEAD too; " +
				"a method a path does not allow gets 405 with Allow, an unknown path 404, both as problems. The admin API under /_mock/ (fault injection, inspection) is described in the package documentation, not here.",
		},
		"paths": obj{
			"/payments": obj{
				"post": obj{
					"operationId":   "createPayment",
					"summary":       "Execute a payment, once per Idempotency-Key.",
					"parameters":    op.Parameters,
					"requestBody":   obj{"required": true, "content": obj{"application/json": obj{"schema": ref("PaymentRequest")}}},
					"responses":     create,
					"x-idempotency": op.Policy,
				},
				"get": obj{
					"operationId": "listPayments",
					"summary":     "Every executed payment, oldest first.",
					"responses": obj{
						"200": obj{"description": "The payments.", "content": obj{"application/json": obj{"schema": obj{"type": "array", "items": ref("Payment")}}}},
						"503": ledgerDown,
					},
				},
			},
			"/payments/{id}": obj{
				"get": obj{
					"operationId": "getPayment",
					"parameters":  []any{obj{"name": "id", "in": "path", "required": true, "schema": obj{"type": "string"}}},
					"responses": obj{
						"200": obj{"description": "The payment.", "content": obj{"application/json": obj{"schema": ref("Payment")}}},
						"404": obj{"description": "No such payment.", "content": problemContent(ref("MockProblemNotFound"))},
						"503": ledgerDown,
					},
				},
			},
			"/balance": obj{
				"get": obj{
					"operationId": "getBalance",
					"summary":     "The balance of every currency set or used so far, or of one.",
					"parameters":  []any{obj{"name": "currency", "in": "query", "schema": currency}},
					"responses": obj{
						"200": obj{"description": "The balances, in minor units.", "content": obj{"application/json": obj{"schema": ref("Balances")}}},
						"400": obj{"description": "The currency is not three letters.", "content": problemContent(ref("MockProblemValidation"))},
						"503": ledgerDown,
					},
				},
			},
			OpenAPIPath: obj{
				"get": obj{
					"operationId": "getOpenAPI",
					"summary":     "This document.",
					"responses": obj{"200": obj{"description": "The server's OpenAPI 3.1 description.",
						"content": obj{"application/json": obj{"schema": obj{"type": "object", "required": []string{"openapi"}}}}}},
				},
			},
		},
		"components": comps,
	}
	return mustJSON(doc)
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

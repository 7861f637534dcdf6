package otelidempotency

import "go.opentelemetry.io/otel/attribute"

// The attribute keys, documented in the package documentation's table.
// The HTTP ones are those of the OpenTelemetry semantic conventions.
const (
	attrOutcome    = attribute.Key("saferetry.outcome")
	attrTookOver   = attribute.Key("saferetry.took_over")
	attrScope      = attribute.Key("saferetry.scope")
	attrStoreOp    = attribute.Key("saferetry.store.operation")
	attrStoreName  = attribute.Key("saferetry.store.name")
	attrMethod     = attribute.Key("http.request.method")
	attrRoute      = attribute.Key("http.route")
	attrStatusCode = attribute.Key("http.response.status_code")
	attrErrorType  = attribute.Key("error.type")
)

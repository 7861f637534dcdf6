package otelidempotency

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// The attribute keys, documented in the package documentation's table,
// besides saferetry.outcome (otelkit.AttrOutcome, which otelsaferetry
// names too). The HTTP ones and error.type are the OpenTelemetry semantic
// conventions' (v1.43.0).
const (
	attrTookOver   = attribute.Key("saferetry.took_over")
	attrScope      = attribute.Key("saferetry.scope")
	attrStoreOp    = attribute.Key("saferetry.store.operation")
	attrStoreName  = attribute.Key("saferetry.store.name")
	attrMethod     = semconv.HTTPRequestMethodKey
	attrRoute      = semconv.HTTPRouteKey
	attrStatusCode = semconv.HTTPResponseStatusCodeKey
	attrErrorType  = semconv.ErrorTypeKey
)

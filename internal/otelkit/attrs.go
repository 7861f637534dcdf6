package otelkit

import "go.opentelemetry.io/otel/attribute"

// AttrOutcome is the attribute both packages give what came of a request:
// the class of the client's answer in otelsaferetry, the
// idempotency.Outcome of the server's in otelidempotency. It is one name
// on both sides, so that a dashboard selects client and server series
// alike (saferetry_outcome on Prometheus).
const AttrOutcome = attribute.Key("saferetry.outcome")

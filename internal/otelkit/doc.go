// Package otelkit is what the module's two OpenTelemetry packages,
// otelsaferetry (the client's) and otelidempotency (the server's), share:
// a [Builder] that makes their instruments, the measurement options of an
// attribute set made once ([Opts]) and kept ([Cache]), so that a
// measurement with a known set allocates nothing, and the attribute they
// both name ([AttrOutcome]).
//
// Only those two packages import it: the core packages compile without
// OpenTelemetry.
package otelkit

package otelsaferetry

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/otelkit"
	"github.com/saferetry/saferetry/internal/retrypolicy"
)

// Attributes of the package's own, as listed in the package documentation.
// The others (http.request.method, server.address, server.port, url.full,
// http.request.resend_count, http.response.status_code, error.type) are the
// OpenTelemetry HTTP semantic conventions' (v1.43.0).
const (
	// AttributeOutcome, saferetry.outcome, is the class of an answer ("1xx"
	// to "5xx"), or "error" when there was none. otelidempotency gives the
	// server's outcomes the same name.
	AttributeOutcome = otelkit.AttrOutcome
	// AttributeDecision is what came after an attempt: "retry" or "return".
	AttributeDecision = attribute.Key("saferetry.decision")
	// AttributeReason is the [saferetry.Reason] of a decision.
	AttributeReason = attribute.Key("saferetry.reason")
	// AttributeRetryWait is the wait before the next attempt, in seconds.
	AttributeRetryWait = attribute.Key("saferetry.retry.wait")
	// AttributeAttempts is the number of attempts an operation made.
	AttributeAttempts = attribute.Key("saferetry.attempts")
	// AttributeKey is the operation's idempotency key, only with
	// [WithKeyAttribute].
	AttributeKey = attribute.Key("saferetry.idempotency_key")
)

// outcome classes a status; 0 stands for no answer.
func outcome(status int) attribute.KeyValue {
	switch {
	case status == 0:
		return AttributeOutcome.String("error")
	case status >= 100 && status < 600:
		return AttributeOutcome.String([...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}[status/100-1])
	}
	return AttributeOutcome.String("_OTHER")
}

// appendMethod appends the http.request.method attribute of m: the
// method when it is one the conventions know, else _OTHER (metrics get no
// more: a method of a caller's choosing would be a series of its own).
func appendMethod(dst []attribute.KeyValue, m string) []attribute.KeyValue {
	if n, ok := knownMethods[m]; ok {
		return append(dst, semconv.HTTPRequestMethodKey.String(n[0]))
	}
	return append(dst, semconv.HTTPRequestMethodOther)
}

// spanAttrs are the attributes of a span of op, for request r: the common
// ones, url.full (unless r has no URL), and http.request.method_original
// when the method is not one the conventions know.
func spanAttrs(op *operation, r *http.Request) []attribute.KeyValue {
	var kv [2]attribute.KeyValue
	n := 0
	if op.url.Valid() {
		kv[n], n = op.url, n+1
	}
	if _, ok := knownMethods[r.Method]; !ok {
		kv[n], n = semconv.HTTPRequestMethodOriginal(r.Method), n+1
	}
	return op.with(kv[:n]...)
}

// appendServer appends server.address and server.port of u, the port from
// the scheme when u names none. A nil u (a request without a URL, which
// the saferetry Transport refuses) names no server.
func appendServer(dst []attribute.KeyValue, u *url.URL) []attribute.KeyValue {
	if u == nil {
		return dst
	}
	port := 0
	if p := u.Port(); p != "" {
		port, _ = strconv.Atoi(p)
	} else if u.Scheme == "http" {
		port = 80
	} else if u.Scheme == "https" {
		port = 443
	}
	dst = append(dst, semconv.ServerAddress(u.Hostname()))
	if port > 0 {
		dst = append(dst, semconv.ServerPort(port))
	}
	return dst
}

// signatureParams are the query parameters whose values the conventions
// redact from url.full by default.
var signatureParams = []string{"AWSAccessKeyId", "Signature", "sig", "X-Goog-Signature"}

// fullURL is u for url.full: credentials in it (in User, or in an
// authority that Opaque carries), and the values of signature parameters,
// are REDACTED; the rest is as sent.
func fullURL(u *url.URL) attribute.KeyValue {
	r := *u
	if r.User != nil {
		r.User = url.UserPassword("REDACTED", "REDACTED")
	}
	if strings.HasPrefix(r.Opaque, "//") {
		r.Opaque = redactOpaqueUser(r.Opaque)
	}
	if r.RawQuery != "" && hasSignature(r.RawQuery) {
		r.RawQuery = redactQuery(r.RawQuery)
	}
	return semconv.URLFull(r.String())
}

// redactOpaqueUser replaces the user information of an opaque part of
// the form "//user:password@host/path", which net/http sends as the
// request target, with REDACTED:REDACTED. An "@" after the authority (in
// the path, a query or a fragment) is not user information.
func redactOpaqueUser(opaque string) string {
	authority := opaque[2:]
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	at := strings.LastIndexByte(authority, '@')
	if at < 0 {
		return opaque
	}
	return "//REDACTED:REDACTED@" + opaque[2+at+1:]
}

// hasSignature reports whether query may hold a signature parameter, at
// little cost for the queries that hold none. A percent-encoded name
// ("%53ignature") is the same parameter once the server decodes it, so a
// query with escapes is looked at decoded.
func hasSignature(query string) bool {
	for _, p := range signatureParams {
		if strings.Contains(query, p+"=") {
			return true
		}
	}
	if !strings.Contains(query, "%") {
		return false
	}
	for param := range strings.FieldsFuncSeq(query, isQuerySep) {
		if name, _, _ := strings.Cut(param, "="); isSignature(name) {
			return true
		}
	}
	return false
}

// isQuerySep reports whether c separates a query's parameters for some
// server: "&" for all, ";" too for those that follow the W3C's old
// recommendation (Rack 2, Python before 3.9.2). Go's parser drops a
// parameter with a ";", which such a server reads as two.
func isQuerySep(c rune) bool { return c == '&' || c == ';' }

// redactQuery replaces the value of each signature parameter of query with
// REDACTED and leaves every other byte as it was: the parameters' order,
// their escapes, and a parameter that Go's parser would drop (one with a
// ";") stay as sent, which re-encoding parsed url.Values would not keep.
// A ";" ends a parameter here as a "&" does (see isQuerySep), so that a
// signature after one is redacted for the servers that read it.
func redactQuery(query string) string {
	var b strings.Builder
	b.Grow(len(query))
	for query != "" {
		i := strings.IndexAny(query, "&;")
		param, sep := query, ""
		if i >= 0 {
			param, sep, query = query[:i], query[i:i+1], query[i+1:]
		} else {
			query = ""
		}
		if name, _, hasValue := strings.Cut(param, "="); hasValue && isSignature(name) {
			b.WriteString(name)
			b.WriteString("=REDACTED")
		} else {
			b.WriteString(param)
		}
		b.WriteString(sep)
	}
	return b.String()
}

// isSignature reports whether name, as written in a query, names a
// signature parameter once decoded.
func isSignature(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	return slices.Contains(signatureParams, name)
}

// appendRequest appends the attributes that the operation's metrics
// share: the method and the server (at most 3).
func appendRequest(dst []attribute.KeyValue, r *http.Request) []attribute.KeyValue {
	return appendServer(appendMethod(dst, r.Method), r.URL)
}

// attemptErrorType is error.type for an attempt's error: saferetry.refused
// for a request that net/http refused before sending any of it (an
// invalid header, a scheme it does not serve), whose Go type is that of
// the wrapper marking it; else the error's type.
func attemptErrorType(err error) attribute.KeyValue {
	if errors.Is(err, retrypolicy.ErrRefused) {
		return semconv.ErrorTypeKey.String("saferetry.refused")
	}
	return semconv.ErrorType(err)
}

// errorType is error.type for an operation's error: the saferetry cause
// when it has one, else what the conventions derive from the error.
func errorType(err error) attribute.KeyValue {
	switch {
	case errors.Is(err, saferetry.ErrOutcomeUnknown):
		return semconv.ErrorTypeKey.String("saferetry.outcome_unknown")
	case errors.Is(err, saferetry.ErrNotSent):
		return semconv.ErrorTypeKey.String("saferetry.not_sent")
	case errors.Is(err, saferetry.ErrInvalidKey):
		return semconv.ErrorTypeKey.String("saferetry.invalid_key")
	}
	return semconv.ErrorType(err)
}

// knownMethods are the methods the conventions know (the empty method is
// GET), with the names of their attempt and operation spans.
var knownMethods = func() map[string][2]string {
	known := map[string][2]string{}
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace, "QUERY"} {
		known[m] = [2]string{m, "saferetry " + m}
	}
	known[""] = known[http.MethodGet]
	return known
}()

// attemptName is the name of an attempt's span: its method, or HTTP when
// the conventions do not know it.
func attemptName(m string) string {
	if n, ok := knownMethods[m]; ok {
		return n[0]
	}
	return "HTTP"
}

// operationName is the name of an operation's span: "saferetry" and the
// attempts' name.
func operationName(m string) string {
	if n, ok := knownMethods[m]; ok {
		return n[1]
	}
	return "saferetry HTTP"
}

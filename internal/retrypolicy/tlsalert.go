package retrypolicy

import (
	"crypto/tls"
	"errors"
	"net"
	"reflect"
)

// refusedTLS reports a TLS alert by which the peer (the server, or an
// https proxy) refused the client's configuration: no TLS version, cipher
// suite or application protocol in common, a client certificate missing
// or not accepted, a server name it does not serve. Every attempt with
// the same configuration meets the same refusal, as one meets a server
// certificate that does not verify (see [Permanent]), so none is retried.
// Alerts that tell of a failure on the peer's side (internal_error), or
// of a record damaged on the way, are not such refusals.
//
// It is kept apart from Permanent because it says nothing of what was
// sent: under TLS 1.3 a client certificate is refused after the client's
// side of the handshake is over, so the alert can arrive after the
// request was written.
func refusedTLS(err error) bool {
	a, ok := tlsAlert(err)
	if !ok {
		return false
	}
	switch a {
	case 40, // handshake_failure: no acceptable parameters
		42,  // bad_certificate (the client's)
		43,  // unsupported_certificate
		44,  // certificate_revoked
		45,  // certificate_expired
		46,  // certificate_unknown
		48,  // unknown_ca
		49,  // access_denied
		70,  // protocol_version
		71,  // insufficient_security
		109, // missing_extension
		110, // unsupported_extension
		112, // unrecognized_name
		116, // certificate_required
		120: // no_application_protocol
		return true
	}
	return false
}

// tlsAlert finds the alert that ended a TLS connection in err: a
// [tls.AlertError] (as QUIC transports return it), or the alert that
// crypto/tls reports as a *net.OpError whose Op is "remote error" and
// whose Err is the alert, of a type of crypto/tls that is not exported
// (a uint8, as AlertError is). That one is found by its type, never by
// its text.
func tlsAlert(err error) (tls.AlertError, bool) {
	var a tls.AlertError
	if errors.As(err, &a) {
		return a, true
	}
	var op *net.OpError
	for errors.As(err, &op) {
		if op.Op == "remote error" && op.Err != nil {
			v := reflect.ValueOf(op.Err)
			if t := v.Type(); t.PkgPath() == "crypto/tls" && t.Kind() == reflect.Uint8 {
				return tls.AlertError(v.Uint()), true
			}
			return 0, false
		}
		err = op.Err
	}
	return 0, false
}

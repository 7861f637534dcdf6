package retrypolicy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/saferetry/saferetry/internal/contract"
)

// ClassifyStatus applies the contract's rules (see [contract.Retried]) to
// a response.
func ClassifyStatus(resp *http.Response) (retry bool, reason Reason) {
	if contract.Replayed(resp.Header) {
		// The recorded outcome: the same on every retry.
		return false, ReasonReplayed
	}
	if contract.FinalAlways(resp.StatusCode) {
		return false, ReasonFinalStatus
	}
	if retry, said := contract.ShouldRetry(resp.Header); said {
		return retry, ReasonServerSaid
	}
	if contract.RetriedStatus(resp.StatusCode) {
		return true, ReasonRetryableStatus
	}
	return false, ReasonFinalStatus
}

// ClassifyError applies the contract's rules to an attempt that got no
// response: every transport error is retried except a permanent one (see
// [Permanent]) and a TLS alert refusing the client's configuration (see
// refusedTLS); timedOut says that the attempt's own time limit expired.
func ClassifyError(err error, timedOut bool) (retry bool, reason Reason) {
	switch {
	case timedOut:
		return true, ReasonAttemptTimeout
	case Permanent(err), refusedTLS(err):
		return false, ReasonPermanentError
	}
	return true, ReasonTransportError
}

// Sent reports whether an attempt that failed with err may have reached the
// server. It may when the base took a connection for it (wrote, see
// [Written.Load]), whatever err says. It did not when the base looked for a
// connection and took none (noConn, see [Written.NoConn]), or when err
// shows that it failed to connect (to the server or to its proxy) or
// failed permanently (the request was refused before sending or the TLS
// handshake failed).
func Sent(err error, timedOut, wrote, noConn bool) bool {
	switch {
	case wrote:
		return true
	case noConn:
		return false
	}
	return timedOut || (!Permanent(err) && !dialError(err))
}

// Permanent reports errors that another attempt cannot cure: the request
// URL is invalid, a redirect leaves the origin with what must stay in it,
// the server's certificate does not verify, or it does not speak TLS.
func Permanent(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
	)
	return errors.Is(err, ErrBadURL) || errors.Is(err, ErrRefused) || errors.Is(err, ErrCrossOriginRedirect) || errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &record)
}

// ErrRefused marks an error with which net/http refused a request before
// sending any of it (see [Refused]): no attempt can cure it, and nothing
// was sent.
var ErrRefused = errors.New("saferetry: request refused before sending")

// Refused reports whether err, an attempt's error without a response, is
// net/http's refusal of req before anything was sent: an invalid header
// field name or value (the check req's header fails too), or a scheme
// other than http and https that the base does not support. Retrying
// such a request only spends the retry budget. Both are told by the
// error's text, which net/http does not type; the request's own fault is
// checked as well, so that another base's error with the same words is not
// taken for a refusal. The request is looked at first, and err's text only
// when the request has such a fault: most errors are never formatted here.
func Refused(req *http.Request, err error) bool {
	switch {
	case req.URL != nil && req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return strings.Contains(err.Error(), "unsupported protocol scheme")
	case !validHeader(req.Header):
		return strings.Contains(err.Error(), "net/http: invalid header field")
	}
	return false
}

// MarkRefused returns err marked with ErrRefused when it is net/http's
// refusal of req before sending (see Refused) and nothing tells that the
// attempt may have been written (wrote false; see Written), and err as it
// is otherwise.
func MarkRefused(req *http.Request, err error, wrote bool) error {
	if wrote || !Refused(req, err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrRefused, err)
}

// validHeader applies net/http's own check of a request's header: each
// name an RFC 9110 token, no value holding a control character but a tab.
func validHeader(h http.Header) bool {
	for name, vals := range h {
		if !contract.ValidToken(name) {
			return false
		}
		for _, v := range vals {
			if !contract.ValidFieldValue(v) {
				return false
			}
		}
	}
	return true
}

// dialError reports a failure to connect: the request was not written.
// net/http wraps a failed dial or TLS handshake with a proxy in an
// *net.OpError whose Op is "proxyconnect" (the dial's own *net.OpError
// inside it), and a failed dial or handshake with a SOCKS5 proxy (its
// refusal of the connect among them) in one whose Op is "socks connect",
// both before any of the request is written.
func dialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect" || op.Op == "socks connect")
}

// RetriedWithoutKey reports the methods that are retried even without a
// key because repeating them is harmless (RFC 9110 safe or idempotent).
func RetriedWithoutKey(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// ErrBadURL marks a request URL that no attempt can cure.
var ErrBadURL = errors.New("saferetry: invalid request URL")

// CheckURL rejects, before anything is sent, a missing URL and an http or
// https URL without a host, which RFC 9110 (section 4.2.1) calls invalid
// and a base would refuse on every attempt. Other schemes are left to the
// base, which may support them. The error matches [ErrBadURL].
func CheckURL(u *url.URL) error {
	switch {
	case u == nil:
		return fmt.Errorf("%w: request has no URL", ErrBadURL)
	case u.Host == "" && (u.Scheme == "http" || u.Scheme == "https"):
		return fmt.Errorf("%w: %s URL without a host", ErrBadURL, u.Scheme)
	}
	return nil
}

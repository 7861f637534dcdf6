package saferetry

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestTLSAlertRetries: a server that ends the TLS handshake with a fatal
// alert saying that the client's configuration is refused (no common
// version or cipher suite, a missing or rejected client certificate, an
// unknown server name) refuses every attempt the same way, as a
// certificate the client refuses does: the operation ends at once with
// ReasonPermanentError, ErrNotSent, without spending the retry budget. An
// alert that says the server failed (internal_error) is retried like any
// transport error.
func TestTLSAlertRetries(t *testing.T) {
	tests := []struct {
		name     string
		alert    byte
		attempts int
		reason   Reason
	}{
		{"handshake_failure", 40, 1, ReasonPermanentError},
		{"bad_certificate", 42, 1, ReasonPermanentError},
		{"unknown_ca", 48, 1, ReasonPermanentError},
		{"protocol_version", 70, 1, ReasonPermanentError},
		{"insufficient_security", 71, 1, ReasonPermanentError},
		{"unrecognized_name", 112, 1, ReasonPermanentError},
		{"certificate_required", 116, 1, ReasonPermanentError},
		{"no_application_protocol", 120, 1, ReasonPermanentError},
		{"internal_error", 80, 3, ReasonMaxAttempts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hl hookLog
			tr := NewTransport(netBase(t), WithBackoff(constBackoff(time.Millisecond)), WithMaxAttempts(3), WithHook(hl.hook))
			resp, err := tr.RoundTrip(outcomePost(t, context.Background(), "https://"+alertingListener(t, tt.alert), nil))
			if resp != nil {
				resp.Body.Close()
				t.Fatalf("got a response (%d), want an error", resp.StatusCode)
			}
			if !errors.Is(err, ErrNotSent) {
				t.Errorf("err = %v, want ErrNotSent", err)
			}
			got := hl.Attempts()
			if len(got) != tt.attempts {
				t.Fatalf("%d attempts, want %d (err = %v)", len(got), tt.attempts, err)
			}
			if r := got[len(got)-1].Reason; r != tt.reason {
				t.Errorf("last reason = %q, want %q", r, tt.reason)
			}
			if n, full := tr.policy.Budget.Available(), int64(DefaultBudgetCapacity); tt.reason == ReasonPermanentError && n != full {
				t.Errorf("budget = %d after a refused handshake, want %d (untouched)", n, full)
			}
		})
	}
}

// TestTLSClientCertificateRefusedAfterWrite: with TLS 1.3 the client's
// handshake is over before the server has checked its certificate, so the
// request is written before the server's alert arrives. The server's TLS
// layer ran none of it, yet the client cannot tell that from the alert
// alone: the outcome stays unknown, the safe side, and the refusal, which
// every attempt would meet, is not retried.
func TestTLSClientCertificateRefusedAfterWrite(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	srv.Config.ErrorLog = discardLog()
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAnyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	base := netBase(t)
	base.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()

	var hl hookLog
	tr := NewTransport(base, WithBackoff(constBackoff(time.Millisecond)), WithMaxAttempts(3), WithHook(hl.hook))
	resp, err := tr.RoundTrip(outcomePost(t, context.Background(), srv.URL, nil))
	if resp != nil {
		resp.Body.Close()
		t.Fatalf("got a response (%d), want an error", resp.StatusCode)
	}
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("err = %v, want ErrOutcomeUnknown", err)
	}
	if got := hl.Attempts(); len(got) != 1 || got[0].Reason != ReasonPermanentError {
		t.Errorf("attempts = %d, last reason %q; want 1, %q (err = %v)", len(got), got[len(got)-1].Reason, ReasonPermanentError, err)
	}
	if got := n.Load(); got != 0 {
		t.Errorf("%d requests reached the handler, want 0", got)
	}
}

// TestTLSAlertWithoutTraceMaybeSent: a base that reports no connection
// through httptrace (as HTTP/3 and many wrappers do not) leaves the
// classification to the error, and a TLS alert may come after the request
// was written (a client certificate refused under TLS 1.3): the alert
// that ends retries is no sign that nothing was sent.
func TestTLSAlertWithoutTraceMaybeSent(t *testing.T) {
	alertErr := dialTLSAlert(t, 116) // certificate_required
	rc := testkit.NewRecorder(testkit.Fail(alertErr), testkit.Status(201))
	tr, _, hl := testTransport(rc)
	resp, err := tr.RoundTrip(newReq(t, context.Background(), http.MethodPost, "x"))
	if resp != nil {
		resp.Body.Close()
		t.Fatalf("got a response (%d), want an error", resp.StatusCode)
	}
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, alertErr) {
		t.Errorf("err = %v, want ErrOutcomeUnknown wrapping %v", err, alertErr)
	}
	if got := hl.Attempts(); len(got) != 1 || got[0].Reason != ReasonPermanentError {
		t.Errorf("attempts = %d, first reason %q; want 1, %q", len(got), got[0].Reason, ReasonPermanentError)
	}
}

// alertingListener is a TLS server that answers every ClientHello with
// the fatal alert code, as a server refusing the handshake does, and
// returns its address; it is closed when t ends.
func alertingListener(t *testing.T, code byte) string {
	return serveConns(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 4<<10)) // the ClientHello
		// A TLS record: type alert (21), version 1.2, length 2, level
		// fatal (2), the code.
		_, _ = c.Write([]byte{21, 3, 3, 0, 2, 2, code})
	})
}

// dialTLSAlert is the error crypto/tls returns for a handshake that the
// server ends with the fatal alert code.
func dialTLSAlert(t *testing.T, code byte) error {
	c, err := tls.Dial("tcp", alertingListener(t, code), &tls.Config{InsecureSkipVerify: true})
	if err == nil {
		c.Close()
		t.Fatal("the handshake succeeded, want an alert")
	}
	return err
}

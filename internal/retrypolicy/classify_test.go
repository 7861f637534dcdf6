package retrypolicy

import (
	"crypto/tls"
	"fmt"
	"testing"
)

// TestClassifyTLSAlert: an alert by which the peer refuses the client's
// TLS configuration ends the retries, found as a tls.AlertError (which
// QUIC transports return) as well; one that tells of a failure on the
// peer's side is retried.
func TestClassifyTLSAlert(t *testing.T) {
	tests := []struct {
		err   error
		retry bool
	}{
		{fmt.Errorf("quic: %w", tls.AlertError(40)), false}, // handshake_failure
		{fmt.Errorf("quic: %w", tls.AlertError(70)), false}, // protocol_version
		{fmt.Errorf("quic: %w", tls.AlertError(80)), true},  // internal_error
	}
	for _, tt := range tests {
		if retry, reason := ClassifyError(tt.err, false); retry != tt.retry {
			t.Errorf("ClassifyError(%v) = %v (%v), want %v", tt.err, retry, reason, tt.retry)
		}
	}
}

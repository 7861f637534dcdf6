package retrypolicy

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
)

// TestSent: what the base told of the attempt's connection outweighs its
// error, either way; without it, the error decides.
func TestSent(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name          string
		err           error
		timedOut      bool
		wrote, noConn bool
		want          bool
	}{
		{"refused dial, nothing told", refused, false, false, false, false},
		{"refused re-dial after a written attempt", refused, false, true, false, true},
		{"context error, nothing told", context.Canceled, false, false, false, true},
		{"context error, no connection", context.Canceled, false, false, true, false},
		{"attempt timeout, no connection", context.DeadlineExceeded, true, false, true, false},
		{"attempt timeout, nothing told", context.DeadlineExceeded, true, false, false, true},
		{"CONNECT refused, no connection", errors.New("Proxy Authentication Required"), false, false, true, false},
		{"EOF after a connection", io.EOF, false, true, false, true},
		{"EOF, nothing told", io.EOF, false, false, false, true},
	}
	for _, tt := range tests {
		if got := Sent(tt.err, tt.timedOut, tt.wrote, tt.noConn); got != tt.want {
			t.Errorf("%s: Sent = %v, want %v", tt.name, got, tt.want)
		}
	}
}

package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestRunReportsBadAddressFirst(t *testing.T) {
	// Nothing listens on port 1: were the address not checked first, the
	// error would be about the database.
	err := run(context.Background(), "256.0.0.1:1", "postgres://postgres@127.0.0.1:1/none?sslmode=disable", io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-addr") {
		t.Fatalf("run with a bad address = %v, want an -addr error", err)
	}
}

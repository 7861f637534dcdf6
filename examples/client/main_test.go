package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/mockserver"
)

func TestRunRejectsBadURL(t *testing.T) {
	for _, u := range []string{"127.0.0.1:8080", "ftp://127.0.0.1", "http://", "", "::"} {
		err := run(context.Background(), u, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "-url") {
			t.Errorf("run(%q) = %v, want a -url error", u, err)
		}
	}
}

// TestRunAgainstMockServer runs the example against an in-process mock
// server, as it would run against the binary, and checks its verdict.
func TestRunAgainstMockServer(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, srv.URL, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "every payment executed exactly once") {
		t.Errorf("output lacks the verdict:\n%s", out.String())
	}
	for _, st := range srv.Keys() {
		if st.Executions != 1 {
			t.Errorf("key %s executed %d times", st.Key, st.Executions)
		}
	}
	if n := len(srv.Payments()); n != 3 {
		t.Errorf("%d payments, want 3", n)
	}
}

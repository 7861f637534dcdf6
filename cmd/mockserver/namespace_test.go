package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestEmptyNamespaceIsRefused: -namespace "" is refused before anything
// starts. It used to be accepted, and one process then kept its keys in
// one namespace and its payments in another: mockserver.WithNamespace("")
// scopes the keys as the default namespace does, while the Redis ledger's
// prefix ("saferetry:mock::") and the metrics' scope were built from the
// flag as given. Such a process shared keys with the default-namespace
// instances over the same Redis but not their payments, so it replayed
// their payments without knowing them, and a takeover of a claim they
// abandoned paid a second time.
func TestEmptyNamespaceIsRefused(t *testing.T) {
	// A context already done: should run start serving, it returns at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{
		{"-addr", "127.0.0.1:0", "-namespace", ""},
		{"-addr", "127.0.0.1:0", "-namespace", "", "-metrics"},
		{"-store", "redis://127.0.0.1:1/0", "-namespace", ""}, // refused before any connection
	} {
		err := run(ctx, args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "-namespace") {
			t.Errorf("run %q = %v, want an error about -namespace", args, err)
		}
	}
}

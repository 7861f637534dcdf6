package main

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/saferetry/saferetry/examples/internal/exampletest"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestPaymentsRoleCreatesItsTables: the command's doc says that a service
// run with -role creates the tables if needed, so -role payments against a
// database without them takes a payment (201), and its retry is replayed.
func TestPaymentsRoleCreatesItsTables(t *testing.T) {
	dbURL, drop, err := ownSchema(context.Background(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	base, shutdown := exampletest.Start(t, func(ctx context.Context, out io.Writer) error {
		return runPayments(ctx, "127.0.0.1:0", dbURL, out)
	})
	const pay = `{"amount": 100, "email": "a@example.com"}`
	first := exampletest.Post(t, base+"/payments", "role-1", pay)
	if first.Status != http.StatusCreated {
		t.Fatalf("payment on a fresh database = %d %q, want 201", first.Status, first.Body)
	}
	if again := exampletest.Post(t, base+"/payments", "role-1", pay); again.Status != http.StatusCreated || !again.Replayed {
		t.Errorf("retry = %d replayed=%v, want the replayed 201", again.Status, again.Replayed)
	}
	shutdown("/payments")
}

package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/internal/testenv"
)

// noPaymentsEnv makes a payments service started by this test binary as a
// child of the fault run exit at once, as one that cannot start would.
const noPaymentsEnv = "SAFERETRY_OUTBOX_TEST_NO_PAYMENTS"

// TestMain runs the command itself when this test binary is started as a
// child of the fault run; otherwise it checks the database once.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if os.Getenv(noPaymentsEnv) == "1" && slices.Contains(os.Args, "payments") {
			os.Exit(1)
		}
		main()
		os.Exit(0)
	}
	testenv.Main(m, testenv.Postgres)
}

// TestFaultRunSmall runs the fault run with 60 payments (a nats-server of
// its own on a free port): every payment gets exactly one e-mail though
// answers are dropped, relays and notification services are killed at
// their worst moments and the nats-server restarts.
func TestFaultRunSmall(t *testing.T) {
	natsBin, err := exec.LookPath("nats-server")
	if err != nil {
		testenv.Unavailable(t, "no nats-server on PATH: install nats-server to run")
	}
	var out bytes.Buffer
	ok, err := faultRun(context.Background(), runConfig{db: testenv.PostgresURL(t), payments: 60, natsPort: testenv.FreePorts(t, 1, false),
		natsBin: natsBin}, &out)
	t.Log("\n" + out.String())
	if err != nil || !ok || !strings.Contains(out.String(), "VERDICT: PASS: 60 of 60 payments have exactly one e-mail") {
		t.Fatalf("fault run = %v, %v; want a PASS verdict", ok, err)
	}
	if !strings.Contains(out.String(), "nats-server restarts 1") || strings.Contains(out.String(), "killed between publish and mark 0") {
		t.Errorf("the faults did not all fire")
	}
}

// TestVerdictFailsOnADoubleOrAMiss: the verdict counts from the database:
// a payment with two e-mails, or none, fails it.
func TestVerdictFailsOnADoubleOrAMiss(t *testing.T) {
	ctx := context.Background()
	dbURL, drop, err := ownSchema(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := setupDB(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO example_payments (id, amount, email) VALUES
	('00000000-0000-8000-8000-000000000001', 1, 'a@x'), ('00000000-0000-8000-8000-000000000002', 1, 'b@x');
INSERT INTO example_emails (payment_id, address) VALUES
	('00000000-0000-8000-8000-000000000001', 'a@x'), ('00000000-0000-8000-8000-000000000001', 'a@x')`); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ok, err := verdict(ctx, pool, runConfig{payments: 2}, &faults{}, &out)
	if err != nil || ok || !strings.Contains(out.String(), "VERDICT: FAIL: 0 of 2") ||
		!strings.Contains(out.String(), "exactly one 0, none 1, more than one 1") {
		t.Errorf("verdict = %v, %v:\n%s\nwant a FAIL with one double and one miss", ok, err, out.String())
	}
}

// TestNATSPortInUse: the fault run refuses a port another server listens
// on, rather than run its faults against a server it did not start.
func TestNATSPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = startNATS("/nonexistent/nats-server", ln.Addr().(*net.TCPAddr).Port)
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("startNATS on a port in use = %v, want an error saying so", err)
	}
}

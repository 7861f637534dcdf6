package main

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testenv"
)

// TestFaultRunStopsWhileWaitingForPayments: Ctrl-C (the end of the run's
// context) while the fault run waits for its payments service to start
// ends the run at once with the context's error, not 30 s later with "did
// not start".
func TestFaultRunStopsWhileWaitingForPayments(t *testing.T) {
	natsBin, err := exec.LookPath("nats-server")
	if err != nil {
		testenv.Unavailable(t, "no nats-server on PATH: install nats-server to run")
	}
	t.Setenv(noPaymentsEnv, "1") // the payments service never starts
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(2*time.Second, cancel) // the run's set-up takes well under that
	start := time.Now()
	ok, err := faultRun(ctx, runConfig{db: testenv.PostgresURL(t), payments: 1, natsPort: testenv.FreePorts(t, 1, false), natsBin: natsBin}, io.Discard)
	if took := time.Since(start); ok || !errors.Is(err, context.Canceled) || took > 10*time.Second {
		t.Errorf("fault run cancelled while waiting for its payments service = %v, %v after %v; want context.Canceled at once", ok, err, took.Round(time.Millisecond))
	}
}

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testenv"
)

// TestNATSServerFoundOnPath: without -nats-server, the fault run starts the
// nats-server found on PATH (installed anywhere: a package, go install,
// Homebrew), not one at a fixed path. The one put first on PATH here
// records that it ran and exits, which fails the run.
func TestNATSServerFoundOnPath(t *testing.T) {
	bin := t.TempDir()
	marker := filepath.Join(bin, "ran")
	if err := os.WriteFile(filepath.Join(bin, "nats-server"), []byte("#!/bin/sh\ntouch "+marker+"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-db", testenv.PostgresURL(t), "-payments", "1",
		"-nats-port", strconv.Itoa(testenv.FreePorts(t, 1, false)))
	cmd.Env = append(os.Environ(), childEnv+"=1", "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if _, statErr := os.Stat(marker); statErr != nil {
		t.Errorf("the nats-server on PATH did not run (the command: %v):\n%s", err, out)
	}
	if err == nil {
		t.Errorf("the run passed with a nats-server that exits at once:\n%s", out)
	}
}

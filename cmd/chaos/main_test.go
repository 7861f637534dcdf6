package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os/exec"
	"strings"
	"testing"
)

// TestRunRefusesBadFlags: every bad flag is refused before anything is
// built or started.
func TestRunRefusesBadFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-profile", "medium"}, "-profile"},
		{[]string{"-scenarios", "kill,meteor"}, "unknown scenario"},
		{[]string{"-stores", "mysql"}, "unknown store"},
		{[]string{"-stores", "postgres", "-modes", "eventual"}, "unknown mode"},
		{[]string{"-workers", "-1"}, "-workers"},
		{[]string{"-lease", "-1s"}, "-lease"},
		{[]string{"-nosuchflag"}, "not defined"},
		{[]string{"-handlers", "keyed,clever"}, "unknown handler"},
	} {
		var stderr bytes.Buffer
		t.Setenv("SAFERETRY_POSTGRES_URL", "postgres://postgres@127.0.0.1:1/none")
		ok, err := run(context.Background(), tt.args, &bytes.Buffer{}, &stderr)
		if ok || err == nil || !(strings.Contains(err.Error(), tt.want) || strings.Contains(stderr.String(), tt.want)) {
			t.Errorf("run %q = %v, %v (stderr %q); want an error about %s", tt.args, ok, err, stderr.String(), tt.want)
		}
	}
}

// TestProfileSettings: each profile brings its own operations and clients,
// and a flag overrides them.
func TestProfileSettings(t *testing.T) {
	for _, tt := range []struct {
		args         []string
		ops, workers int
	}{
		{nil, 300, 16},
		{[]string{"-profile", "long"}, 100_000, 32},
		{[]string{"-profile", "long", "-workers", "8", "-ops", "50"}, 50, 8},
	} {
		p, err := parseFlags(tt.args, &bytes.Buffer{})
		if err != nil || p.ops != tt.ops || p.workers != tt.workers {
			t.Errorf("parseFlags %q = ops %d, workers %d, %v; want %d, %d", tt.args, p.ops, p.workers, err, tt.ops, tt.workers)
		}
	}
}

func TestHelp(t *testing.T) {
	_, err := run(context.Background(), []string{"-h"}, &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("run -h = %v, want flag.ErrHelp", err)
	}
}

// TestMissingServiceIsSaid: without SAFERETRY_POSTGRES_URL the postgres
// cells are not run, and the run says so; under
// SAFERETRY_REQUIRE_SERVICES=1 that fails.
func TestMissingServiceIsSaid(t *testing.T) {
	t.Setenv("SAFERETRY_POSTGRES_URL", "")
	t.Setenv("SAFERETRY_REQUIRE_SERVICES", "1")
	var stderr bytes.Buffer
	ok, err := run(context.Background(), []string{"-stores", "postgres"}, &bytes.Buffer{}, &stderr)
	if ok || err == nil || !strings.Contains(stderr.String(), "SAFERETRY_POSTGRES_URL is not set") {
		t.Fatalf("run = %v, %v, stderr %q", ok, err, stderr.String())
	}
}

// TestFastPathCells: -modes fastpath runs lease mode with the replay fast
// path on both stores, keyed and unkeyed, as chaos.ModeFastPath cells;
// txfastpath runs transactional mode with it, on PostgreSQL only and keyed
// only, as chaos.ModeTxFastPath cells.
func TestFastPathCells(t *testing.T) {
	p, err := parseFlags([]string{"-modes", "fastpath,txfastpath", "-scenarios", "kill"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	cells, missing, err := p.cells(true)
	if err != nil || len(missing) != 0 {
		t.Fatalf("cells: %v %v", missing, err)
	}
	var got []string
	for _, c := range cells {
		got = append(got, c.Store+" "+c.Mode+" "+c.Handler()+" "+c.Scenario)
	}
	want := []string{"redis fastpath keyed kill", "redis fastpath unkeyed all", "redis fastpath unkeyed renew",
		"postgres fastpath keyed kill", "postgres fastpath unkeyed all", "postgres fastpath unkeyed renew",
		"postgres txfastpath keyed kill"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("cells = %q, want %q", got, want)
	}
}

// TestNothingToRunSaysWhy: flags whose combinations leave no cell (a
// transactional mode over Redis, the unkeyed handler in a transactional
// mode) are refused with the rule that leaves them out, not a bare
// "nothing to run".
func TestNothingToRunSaysWhy(t *testing.T) {
	t.Setenv("SAFERETRY_POSTGRES_URL", "postgres://postgres@127.0.0.1:1/none")
	t.Setenv("SAFERETRY_REQUIRE_SERVICES", "")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-stores", "postgres", "-modes", "tx,txfastpath", "-handlers", "unkeyed"}, "unkeyed"},
	}
	if _, err := exec.LookPath("redis-server"); err == nil {
		cases = append(cases, struct {
			args []string
			want string
		}{[]string{"-stores", "redis", "-modes", "tx"}, "postgres"})
	}
	for _, tt := range cases {
		ok, err := run(context.Background(), tt.args, &bytes.Buffer{}, &bytes.Buffer{})
		if ok || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run %q = %v, %v; want an error that says why nothing runs (%s)", tt.args, ok, err, tt.want)
		}
	}
}

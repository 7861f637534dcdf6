// Command chaos runs the chaos suite (package internal/chaos): three real
// cmd/mockserver processes per cell over a shared store, a client pool
// paying through the saferetry client, and kill -9, SIGSTOP past the
// lease, Redis restarts, PostgreSQL cuts and slowdowns, dropped answers and
// 503 bursts; then it prints, from the servers' shared ledger, a table of
// doubles, lost and unresolved payments per store, mode and scenario, and
// exits 1 unless every keyed cell is clean and every cell fired a fault.
//
// Usage:
//
//	go run ./cmd/chaos                      # the short profile, as CI runs it
//	go run ./cmd/chaos -profile long        # 100,000 operations per store and mode, every fault at once
//	go run ./cmd/chaos -ops 20000 -scenarios kill,pause -stores postgres -modes tx
//
// Flags:
//
//	-profile    short (default: every scenario per store and mode, 300 operations each, paced over 6 s,
//	            and the unkeyed handler) or long (scenario all, 100000 operations per store and mode, unpaced)
//	-ops        operations per cell (overrides the profile)
//	-stores     redis,postgres (default both)
//	-modes      store modes: lease,tx,fastpath,txfastpath (tx and txfastpath apply to postgres only;
//	            fastpath and txfastpath are lease and tx mode with the stores' replay fast path on every
//	            claim, run only when named)
//	-scenarios  mock-faults,kill,pause,store,all: the keyed cells' (overrides the profile)
//	-handlers   keyed,unkeyed: the payment handlers to run (default keyed,unkeyed short, keyed long);
//	            the unkeyed one pays anew on every execution and runs in lease mode only, under
//	            scenario all (its doubles are measured) and scenario renew (mock faults, every payment
//	            working past the lease, no fault that lets a lease lapse: a double fails the run)
//	-workers    concurrent clients (default 16 short, 32 long)
//	-lease      the servers' lease (default 1s)
//	-pace       spread each cell's operations over at least this long (overrides the profile)
//	-timeout    bound of the whole run (default 10m short, 3h long)
//	-keep       keep the work directory (logs of every process) instead of removing it
//
// It needs redis-server on PATH for the Redis cells (its own, on a port of
// its own, with appendfsync always) and SAFERETRY_POSTGRES_URL for the
// PostgreSQL cells (tables of its own, dropped afterwards); a cell whose
// service is missing is reported as not run, and fails the run under
// SAFERETRY_REQUIRE_SERVICES=1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/saferetry/saferetry/internal/chaos"
	"github.com/saferetry/saferetry/internal/cliflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (bool, error) {
	p, err := parseFlags(args, stderr)
	if err != nil {
		return false, err
	}
	cells, missing, err := p.cells(os.Getenv("SAFERETRY_POSTGRES_URL") != "")
	if err != nil {
		return false, err
	}
	for _, m := range missing {
		fmt.Fprintf(stderr, "chaos: not run: %s\n", m)
	}
	if len(missing) > 0 && os.Getenv("SAFERETRY_REQUIRE_SERVICES") == "1" {
		return false, errors.New("chaos: a service is missing and SAFERETRY_REQUIRE_SERVICES=1")
	}
	if len(cells) == 0 && len(missing) == 0 {
		// The flags were each valid, but no store, mode and handler fit
		// together.
		return false, errors.New("chaos: nothing to run: -modes tx and txfastpath run over postgres only, and the unkeyed handler in lease and fastpath mode only")
	}
	if len(cells) == 0 {
		return false, errors.New("chaos: nothing to run")
	}

	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "saferetry-chaos-")
	if err != nil {
		return false, err
	}
	if p.keep {
		fmt.Fprintf(stderr, "chaos: logs in %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin, err := buildMockServer(ctx, dir)
	if err != nil {
		return false, err
	}
	begin := time.Now()
	results := chaos.Run(ctx, chaos.Config{
		MockServer:  bin,
		PostgresURL: os.Getenv("SAFERETRY_POSTGRES_URL"),
		Dir:         dir,
		Cells:       cells,
		Ops:         p.ops,
		MinDuration: p.pace,
		Workers:     p.workers,
		Lease:       p.lease,
		Log:         stderr,
	})
	fmt.Fprintf(stdout, "chaos: profile %s, %d cells, lease %v, %d workers, %v\n", p.profile, len(results), p.lease, p.workers, time.Since(begin).Round(time.Second))
	chaos.PrintTable(stdout, results)
	line, ok := chaos.Summary(results)
	if len(results) < len(cells) {
		line += fmt.Sprintf(" (%d of %d cells did not run: %v)", len(cells)-len(results), len(cells), ctx.Err())
		ok = false
	}
	fmt.Fprintln(stdout, line)
	return ok, nil
}

// plan is what to run: the profile's settings with the flags' overrides.
type plan struct {
	profile        string
	ops, workers   int
	pace, timeout  time.Duration
	lease          time.Duration
	scenarios      []string
	stores, modes  []string
	keyed, unkeyed bool
	keep           bool
}

// parseFlags reads the profile, then the flags that override it.
func parseFlags(args []string, stderr io.Writer) (plan, error) {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	profile := fs.String("profile", "short", "short or long")
	ops := fs.Int("ops", 0, "operations per cell (0: the profile's)")
	stores := fs.String("stores", "redis,postgres", "stores to run")
	modes := fs.String("modes", "lease,tx", "modes to run: lease, tx (postgres only), fastpath (lease mode with the replay fast path), txfastpath (tx mode with it)")
	scenarios := fs.String("scenarios", "", "scenarios to run (empty: the profile's)")
	handlers := fs.String("handlers", "", "payment handlers: keyed,unkeyed (empty: the profile's)")
	workers := fs.Int("workers", 0, "concurrent clients (0: the profile's)")
	lease := fs.Duration("lease", time.Second, "the servers' lease")
	pace := fs.Duration("pace", 0, "spread each cell's operations over at least this long (0: unpaced; not given: the profile's)")
	timeout := fs.Duration("timeout", 0, "bound of the whole run (0: the profile's)")
	keep := fs.Bool("keep", false, "keep the work directory")
	if err := cliflag.Parse(fs, args); err != nil {
		return plan{}, err
	}
	paceSet := false
	fs.Visit(func(f *flag.Flag) { paceSet = paceSet || f.Name == "pace" })
	p := plan{profile: *profile, lease: *lease, keep: *keep,
		stores: strings.Split(*stores, ","), modes: strings.Split(*modes, ",")}
	switch *profile {
	case "short":
		p.ops, p.workers, p.pace, p.scenarios, p.keyed, p.unkeyed, p.timeout = 300, 16, 6*time.Second, chaos.Scenarios, true, true, 10*time.Minute
	case "long":
		p.ops, p.workers, p.pace, p.scenarios, p.keyed, p.timeout = 100_000, 32, 0, []string{chaos.ScenarioAll}, true, 3*time.Hour
	default:
		return p, fmt.Errorf("chaos: -profile %q: want short or long", *profile)
	}
	if *ops > 0 {
		p.ops = *ops
	}
	if paceSet {
		p.pace = *pace
	}
	if *timeout > 0 {
		p.timeout = *timeout
	}
	if *workers > 0 {
		p.workers = *workers
	}
	if *workers < 0 || *lease <= 0 {
		return p, errors.New("chaos: -workers and -lease must be positive")
	}
	if *ops < 0 || *pace < 0 || *timeout < 0 {
		return p, errors.New("chaos: -ops, -pace and -timeout must not be negative")
	}
	if *scenarios != "" {
		p.scenarios = strings.Split(*scenarios, ",")
		for _, s := range p.scenarios {
			if !slices.Contains(chaos.Scenarios, s) {
				return p, fmt.Errorf("chaos: unknown scenario %q (want %s)", s, strings.Join(chaos.Scenarios, ","))
			}
		}
	}
	if *handlers != "" {
		p.keyed, p.unkeyed = false, false
		for _, h := range strings.Split(*handlers, ",") {
			switch h {
			case "keyed":
				p.keyed = true
			case "unkeyed":
				p.unkeyed = true
			default:
				return p, fmt.Errorf("chaos: unknown handler %q (want keyed or unkeyed)", h)
			}
		}
	}
	return p, nil
}

// cells lists the cells of the plan, and the services missing for others.
func (p plan) cells(havePostgres bool) (cells []chaos.Cell, missing []string, err error) {
	for _, store := range p.stores {
		switch store {
		case "redis":
			if _, err := exec.LookPath("redis-server"); err != nil {
				missing = append(missing, "redis: redis-server is not on PATH")
				continue
			}
		case "postgres":
			if !havePostgres {
				missing = append(missing, "postgres: SAFERETRY_POSTGRES_URL is not set (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
				continue
			}
		default:
			return nil, nil, fmt.Errorf("chaos: unknown store %q (want redis or postgres)", store)
		}
		for _, mode := range p.modes {
			tx := mode == "tx" || mode == chaos.ModeTxFastPath
			if mode != "lease" && mode != chaos.ModeFastPath && !tx {
				return nil, nil, fmt.Errorf("chaos: unknown mode %q (want lease, tx, %s or %s)", mode, chaos.ModeFastPath, chaos.ModeTxFastPath)
			}
			if tx && store != "postgres" {
				continue
			}
			if p.keyed {
				for _, sc := range p.scenarios {
					cells = append(cells, chaos.Cell{Store: store, Mode: mode, Scenario: sc})
				}
			}
			if p.unkeyed && !tx {
				cells = append(cells, chaos.Cell{Store: store, Mode: mode, Unkeyed: true, Scenario: chaos.ScenarioAll},
					chaos.Cell{Store: store, Mode: mode, Unkeyed: true, Scenario: chaos.ScenarioRenew})
			}
		}
	}
	return cells, missing, nil
}

// buildMockServer builds cmd/mockserver into dir, from the module this
// command is run in.
func buildMockServer(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "mockserver")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/mockserver")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("chaos: building cmd/mockserver: %v\n%s", err, out)
	}
	return bin, nil
}

// moduleRoot finds the directory of the go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("chaos: run it from inside the saferetry module (no go.mod found)")
		}
		dir = parent
	}
}

package serve

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Main is an example's main after flag.Parse: it refuses stray arguments
// (exit 2), runs run under a context that SIGINT and SIGTERM cancel, and
// exits 1 with run's error, prefixed by name, when run fails.
func Main(name string, run func(ctx context.Context) error) {
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s: unexpected arguments %q\n", name, flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		stop()
		os.Exit(1)
	}
}

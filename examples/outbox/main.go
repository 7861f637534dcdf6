// Command outbox is a payments service and a notification service that
// send exactly one e-mail per payment, however often the client retries
// and whatever dies when: the payment, its idempotency record and its
// payment.created event commit in one PostgreSQL transaction
// (idempotency's transactional mode, pgstore.NewTx, with outbox.Enqueue);
// relays publish the event to NATS JetStream (Nats-Msg-Id = the event's
// ID); the notification service writes its e-mail row and its inbox row in
// one transaction and acknowledges after that commit.
//
// Without -role it runs the fault run: a nats-server of its own (the
// -nats-server binary, by default the one on PATH, on -nats-port, its store
// in a temporary directory), a PostgreSQL schema of
// its own (dropped at the end), the payments service, two relays and two
// notification services as child processes, and -payments client
// operations that retry with dropped answers, while relays are killed
// between publishing and marking, notification services after their
// commit and before their ack, and the nats-server is killed and
// restarted. It prints the e-mails per payment and a VERDICT line, and
// exits 1 unless every payment has exactly one e-mail:
//
//	go run ./examples/outbox -db 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' -payments 1000
//
// With -role payments, relay or notify it runs one service against -db and
// -nats (the tables and stream are created if needed).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	fs := flag.NewFlagSet("outbox", flag.ExitOnError)
	role := fs.String("role", "", "run one service: payments, relay or notify; empty: the fault run")
	db := fs.String("db", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL")
	natsURL := fs.String("nats", "nats://127.0.0.1:4222", "NATS URL (-role only)")
	addr := fs.String("addr", "127.0.0.1:0", "payments: address to listen on")
	crashAfter := fs.Int("crash-after", 0, "relay, notify: SIGKILL itself after this many batches or messages (0: never)")
	payments := fs.Int("payments", 200, "fault run: client operations")
	natsPort := fs.Int("nats-port", 14222, "fault run: port of its own nats-server")
	natsBin := fs.String("nats-server", "nats-server", "fault run: the nats-server binary (a name without a slash is looked up on PATH)")
	verbose := fs.Bool("v", false, "fault run: print every payment's e-mail count")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "outbox: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	ok := true
	switch *role {
	case "":
		ok, err = faultRun(ctx, runConfig{db: *db, payments: *payments, natsPort: *natsPort, natsBin: *natsBin, verbose: *verbose}, os.Stdout)
	case "payments":
		err = runPayments(ctx, *addr, *db, os.Stdout)
	case "relay":
		err = runRelay(ctx, *db, *natsURL, *crashAfter, os.Stdout)
	case "notify":
		err = runNotify(ctx, *db, *natsURL, *crashAfter, os.Stdout)
	default:
		err = fmt.Errorf("unknown -role %q", *role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "outbox:", err)
		stop()
		os.Exit(1)
	}
	if !ok {
		stop()
		os.Exit(1)
	}
}

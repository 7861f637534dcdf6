// Command stalewriter is cmd/mockserver over a broken PostgreSQL store, for
// TestJudgeCatchesAStaleHoldersOverwrite: its Complete ignores the fencing
// token. A holder whose claim was taken over (it was paused past its
// lease) and whose key the new holder already completed completes it
// again, over the newer answer, which a client may already have been
// given. It takes the flags the chaos suite gives cmd/mockserver (lease
// mode over a postgres:// store only), and prints the same ready line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/pgledger"
)

// staleCompletes is a pgstore.Store that ignores the fencing token: a
// stale Renew reports success (and extends nothing), so that its holder
// goes on as if it held the claim; a stale Complete takes the row back for
// its token, completed or not, and completes it. Each completion over a
// completed row prints an "overwrote" line.
type staleCompletes struct {
	*pgstore.Store
	pool *pgxpool.Pool
}

func (s staleCompletes) Renew(ctx context.Context, k idempotency.Key, token int64, lease time.Duration) error {
	if err := s.Store.Renew(ctx, k, token, lease); !errors.Is(err, idempotency.ErrStaleToken) {
		return err
	}
	return nil
}

func (s staleCompletes) Complete(ctx context.Context, k idempotency.Key, token int64, resp idempotency.Response, ttl time.Duration) error {
	err := s.Store.Complete(ctx, k, token, resp, ttl)
	if !errors.Is(err, idempotency.ErrStaleToken) {
		return err
	}
	var state int
	if err := s.pool.QueryRow(ctx, `WITH old AS (SELECT state FROM `+pgx.Identifier{s.Table()}.Sanitize()+
		` WHERE scope = $1 AND key = $2 FOR UPDATE) UPDATE `+pgx.Identifier{s.Table()}.Sanitize()+
		` SET state = 1, token = $3 FROM old WHERE scope = $1 AND key = $2 RETURNING old.state`, k.Scope, k.Key, token).Scan(&state); err != nil {
		return err
	}
	if err := s.Store.Complete(ctx, k, token, resp, ttl); err != nil {
		return err
	}
	if state == 2 {
		fmt.Printf("stalewriter: overwrote the completed answer of %s with token %d\n", k.Key, token)
	}
	return nil
}

// minWork is the least time the handler works after paying, whatever
// -payment-work says.
const minWork = 300 * time.Millisecond

type balances map[string]int64

func (b balances) String() string { return fmt.Sprint(map[string]int64(b)) }

func (b balances) Set(v string) error {
	cur, amount, ok := strings.Cut(v, "=")
	n, err := strconv.ParseInt(amount, 10, 64)
	if !ok || err != nil {
		return fmt.Errorf("want CUR=amount, not %q", v)
	}
	b[cur] = n
	return nil
}

func main() {
	fs := flag.NewFlagSet("stalewriter", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "")
	store := fs.String("store", "", "")
	table := fs.String("table", "", "")
	mode := fs.String("mode", "lease", "")
	namespace := fs.String("namespace", "mockserver", "")
	lease := fs.Duration("lease", 10*time.Second, "")
	ttl := fs.Duration("ttl", time.Hour, "")
	work := fs.Duration("payment-work", 0, "")
	unkeyed := fs.Bool("unkeyed-payments", false, "")
	fs.Duration("store-wait", 0, "")
	opening := balances{}
	fs.Var(opening, "balance", "")
	_ = fs.Parse(os.Args[1:])
	if *mode != "lease" || !strings.HasPrefix(*store, "postgres") {
		fmt.Fprintln(os.Stderr, "stalewriter: lease mode over a postgres:// store only")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, *store)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer pool.Close()
	st := pgstore.New(pool, pgstore.WithTable(*table))
	led := pgledger.New(pool, st.Table(), opening)
	for _, create := range []func(context.Context) error{st.CreateSchema, led.CreateSchema} {
		if err := create(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	opts := []mockserver.Option{
		mockserver.WithStore(staleCompletes{st, pool}),
		mockserver.WithLedger(led),
		mockserver.WithNamespace(*namespace),
		mockserver.WithAdminAPI(true),
		mockserver.WithIdempotencyOptions(idempotency.WithTTL(*ttl), idempotency.WithLease(*lease)),
	}
	if *unkeyed {
		opts = append(opts, mockserver.WithUnkeyedPayments())
	}
	// A handler that works longer after paying is caught by more
	// pauses between paying and completing.
	opts = append(opts, mockserver.WithPaymentWork(max(*work, minWork)))
	ln, err := listen(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	srv := mockserver.New(append(opts, mockserver.WithListener(ln))...)
	fmt.Printf("mockserver: listening on %s (stale completes)\n", srv.URL)
	<-ctx.Done()
	srv.Close()
}

func listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

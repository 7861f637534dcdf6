package pgstore_test

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestRenewalsKeepTheirConnectionsWhenTheServerIsFull: a renewal that
// finds the kept renewal connections busy opens another, which a server
// at max_connections refuses with a FATAL error ("sorry, too many clients
// already"). That says nothing of the open connections: closing them all
// (as for a session the server ended) gave their places away to other
// clients, and every later renewal had to open a connection the server
// refused, until the claims were counted lost.
func TestRenewalsKeepTheirConnectionsWhenTheServerIsFull(t *testing.T) {
	var full atomic.Bool
	app := testenv.RandomName("pgstore-full-")
	pool := newPool(t, func(c *pgxpool.Config) {
		c.MaxConns = 4
		c.ConnConfig.RuntimeParams["application_name"] = app
		dial := c.ConnConfig.DialFunc
		c.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if !full.Load() {
				return dial(ctx, network, addr)
			}
			client, server := net.Pipe()
			go func() { // a server at max_connections: FATAL 53300 at startup
				defer server.Close()
				_ = server.SetDeadline(time.Now().Add(5 * time.Second))
				var n [4]byte
				if _, err := io.ReadFull(server, n[:]); err != nil {
					return
				}
				size := int(n[0])<<24 | int(n[1])<<16 | int(n[2])<<8 | int(n[3])
				if _, err := io.CopyN(io.Discard, server, int64(size-4)); err != nil {
					return
				}
				msg, _ := (&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "53300", Message: "sorry, too many clients already"}).Encode(nil)
				_, _ = server.Write(msg)
			}()
			return client, nil
		}
	})
	admin := newPool(t)
	s := newStore(t, pool, pgstore.WithRenewalConns(1))
	ctx := ctxT(t)
	held, other := key("held"), key("other")
	var tokens [2]int64
	for i, k := range []idempotency.Key{held, other} {
		res, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
		if err != nil || !res.Acquired {
			t.Fatalf("Claim %v = %+v, %v", k, res, err)
		}
		tokens[i] = res.Token
	}
	// The first renewal opens the renewal pool; once its kept connection
	// is open, renewals use it.
	testenv.Eventually(t, "the renewal connection is open", func() bool {
		if err := s.Renew(ctx, held, tokens[0], time.Minute); err != nil {
			t.Fatal(err)
		}
		var n int32
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > pool.Stat().TotalConns()
	})
	// Keep the kept connection busy: its renewal waits for a row lock.
	lock, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background())
	if _, err := lock.Exec(ctx, `SELECT 1 FROM "`+s.Table()+`" WHERE key = $1 FOR UPDATE`, held.Key); err != nil {
		t.Fatal(err)
	}
	busy := make(chan error, 1)
	go func() { busy <- s.Renew(ctx, held, tokens[0], time.Minute) }()
	testenv.Eventually(t, "the renewal waits for the lock", func() bool {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%`+s.Table()+`%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
	full.Store(true)
	if err := s.Renew(ctx, other, tokens[1], time.Minute); err == nil {
		t.Fatal("a renewal that had to open a connection the server refused succeeded")
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-busy; err != nil {
		t.Fatalf("the renewal on the kept connection: %v", err)
	}
	// The kept connection is free again; the server still accepts none.
	if err := s.Renew(ctx, other, tokens[1], time.Minute); err != nil {
		t.Fatalf("a renewal with the kept connection idle, the server full: %v; want it renewed on the kept connection", err)
	}
}

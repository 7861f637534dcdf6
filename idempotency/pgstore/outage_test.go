package pgstore_test

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/internal/testkit"
)

// poolAt returns a pool on the test database reached through addr.
func poolAt(t *testing.T, addr string) *pgxpool.Pool {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	return newPool(t, func(c *pgxpool.Config) {
		c.ConnConfig.Host = host
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			t.Fatal(err)
		}
		c.ConnConfig.Port = uint16(p)
		c.ConnConfig.ConnectTimeout = 2 * time.Second
		c.ConnConfig.Fallbacks = nil
	})
}

func TestOutageWrongPortAnswers503(t *testing.T) {
	good := newPool(t)
	table := uniqueTable(t, good)
	if err := pgstore.New(good, pgstore.WithTable(table)).CreateSchema(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	bad := poolAt(t, testkit.RefusedAddr(t))
	stores := map[string]idempotency.Store{
		"lease": pgstore.New(bad, pgstore.WithTable(table)),
		"tx":    pgstore.NewTx(bad, pgstore.WithTable(table)),
	}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			h := &orderHandler{pool: good, table: "unused", who: "a"}
			r := post(ctxT(t), instance(t, s, h).URL, "k-"+name, `{}`)
			if r.Err != nil || r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" ||
				!strings.Contains(r.Body, idempotency.ProblemStoreUnavailable) {
				t.Fatalf("reply = %+v, want 503 store unavailable with Retry-After", r)
			}
			if h.runs.Load() != 0 {
				t.Fatal("the handler ran while the store was unreachable")
			}
		})
	}
}

func TestOutageRecoversWhenTheDatabaseIsBack(t *testing.T) {
	good := newPool(t)
	cc := good.Config().ConnConfig
	target := net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	for _, mode := range []string{"lease", "tx"} {
		t.Run(mode, func(t *testing.T) {
			table := uniqueTable(t, good)
			if err := pgstore.New(good, pgstore.WithTable(table)).CreateSchema(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			orders := ordersTable(t, good, table)
			p := testenv.StartProxy(t, target)
			viaProxy := poolAt(t, p.Addr())
			var s idempotency.Store = pgstore.New(viaProxy, pgstore.WithTable(table))
			if mode == "tx" {
				s = pgstore.NewTx(viaProxy, pgstore.WithTable(table))
			}
			h := &orderHandler{pool: good, table: orders, who: "a"}
			url := instance(t, s, h).URL
			ctx := ctxT(t)
			if r := post(ctx, url, "before", `{}`); r.Status != 201 {
				t.Fatalf("before the outage: %+v", r)
			}
			p.Stop()
			for range 3 {
				r := post(ctx, url, "during", `{}`)
				if r.Err != nil || r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
					t.Fatalf("during the outage: %+v, want 503 with Retry-After", r)
				}
			}
			if h.runs.Load() != 1 {
				t.Fatalf("handler runs = %d during the outage, want none beyond the first", h.runs.Load())
			}
			p.Restart(t)
			var r reply
			testenv.Eventually(t, "requests succeed again", func() bool {
				r = post(ctx, url, "during", `{}`)
				return r.Status != http.StatusServiceUnavailable
			})
			if r.Err != nil || r.Status != 201 || h.runs.Load() != 2 {
				t.Fatalf("after the outage: %+v, runs %d", r, h.runs.Load())
			}
			if r := post(ctx, url, "before", `{}`); r.Status != 201 || r.Header.Get(idempotency.HeaderReplayed) != "true" {
				t.Fatalf("replay after the outage: %+v", r)
			}
		})
	}
}

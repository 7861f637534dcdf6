package pgledger_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/internal/testkit"
	"github.com/saferetry/saferetry/mockserver"
	"github.com/saferetry/saferetry/mockserver/ledgertest"
	"github.com/saferetry/saferetry/mockserver/pgledger"
)

func TestNewPanics(t *testing.T) {
	// New does not connect: a pool of an address nobody serves will do.
	idle, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	testkit.WantPanic(t, "nil pool", func() { pgledger.New(nil, "ledger", nil) })
	testkit.WantPanic(t, "invalid table name", func() { pgledger.New(idle, "Ledger", nil) })
	testkit.WantPanic(t, "invalid table name", func() { pgledger.New(idle, "a.b.c", nil) })
	testkit.WantPanic(t, "invalid table name", func() { pgledger.New(idle, `a"b`, nil) })
}

func TestSchema(t *testing.T) {
	sql, err := pgledger.Schema("shop.ledger")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"shop"."ledger_payments"`, `"shop"."ledger_balances"`, "IF NOT EXISTS"} {
		if !strings.Contains(sql, want) {
			t.Errorf("Schema(shop.ledger) lacks %s:\n%s", want, sql)
		}
	}
	if sql, err := pgledger.Schema("ledger"); err != nil || !strings.Contains(sql, `TABLE IF NOT EXISTS "ledger_payments"`) {
		t.Errorf("Schema(ledger) = %v:\n%s", err, sql)
	}
	for _, bad := range []string{"", "Ledger", "a.b.c", "1ledger", strings.Repeat("x", 49)} {
		if _, err := pgledger.Schema(bad); !errors.Is(err, pgstore.ErrInvalidTable) {
			t.Errorf("Schema(%q) = %v, want ErrInvalidTable", bad, err)
		}
	}
}

// CreateSchema is safe to run at once from several processes, and again.
func TestCreateSchemaConcurrentAndRepeated(t *testing.T) {
	pools := []*pgxpool.Pool{newPool(t), newPool(t)}
	table := testenv.RandomName("pgledger_test_")
	t.Cleanup(func() {
		if err := pgledger.New(pools[0], table, nil).DropSchema(context.Background()); err != nil {
			t.Errorf("DropSchema: %v", err)
		}
	})
	ctx := ctxT(t)
	for range 2 {
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := pgledger.New(pools[i%2], table, nil).CreateSchema(ctx); err != nil {
					t.Errorf("CreateSchema %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
	}
	l := pgledger.New(pools[1], table, nil)
	if _, _, err := l.Pay(ctx, "ref", 0, payment("pay_1", 1, "EUR")); err != nil {
		t.Fatalf("Pay after CreateSchema: %v", err)
	}
}

func TestSchemaQualifiedTable(t *testing.T) {
	pool := newPool(t)
	ctx := ctxT(t)
	schema := testenv.RandomName("pgledger_schema_")
	if _, err := pool.Exec(ctx, `CREATE SCHEMA "`+schema+`"`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), `DROP SCHEMA "`+schema+`" CASCADE`); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	l := pgledger.New(pool, schema+".ledger", map[string]int64{"EUR": 100})
	if err := l.CreateSchema(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Pay(ctx, "ref", 0, payment("pay_1", 30, "EUR")); err != nil {
		t.Fatal(err)
	}
	if n := scalar(t, pool, `SELECT count(*) FROM "`+schema+`"."ledger_payments"`); n != 1 {
		t.Errorf("%d payments in %s.ledger_payments, want 1", n, schema)
	}
	if b := scalar(t, pool, `SELECT balance FROM "`+schema+`"."ledger_balances" WHERE currency = 'EUR'`); b != 70 {
		t.Errorf("stored EUR balance %d, want 70", b)
	}
	if err := l.DropSchema(ctx); err != nil {
		t.Fatal(err)
	}
}

// Many processes paying under one ref at once: one payment, one debit, as
// the tables themselves say.
func TestConcurrentSameRefOneDebit(t *testing.T) {
	admin := newPool(t)
	table := newTable(t, admin)
	const processes, perProcess = 6, 4
	ledgers := make([]*pgledger.Ledger, processes)
	for i := range ledgers {
		ledgers[i] = pgledger.New(newPool(t), table, map[string]int64{"EUR": 1000})
	}
	ctx := ctxT(t)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fresh int
		ids   = map[string]bool{}
	)
	for i := range processes * perProcess {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, found, err := ledgers[i%processes].Pay(ctx, "contended", 0, payment("pay_c"+string(rune('a'+i)), 7, "EUR"))
			if err != nil {
				t.Errorf("Pay %d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !found {
				fresh++
			}
			ids[p.ID] = true
		}()
	}
	wg.Wait()
	if fresh != 1 || len(ids) != 1 {
		t.Errorf("%d runs paid, %d distinct payments answered; want 1 and 1", fresh, len(ids))
	}
	if n := scalar(t, admin, `SELECT count(*) FROM "`+table+`_payments" WHERE ref = 'contended'`); n != 1 {
		t.Errorf("%d rows under the ref, want 1", n)
	}
	if b := scalar(t, admin, `SELECT balance FROM "`+table+`_balances" WHERE currency = 'EUR'`); b != 1000-7 {
		t.Errorf("stored balance %d, want %d", b, 1000-7)
	}
}

// A refused payment writes nothing: no balance row for a currency never
// paid in, so Balances does not list it.
func TestRefusedPaymentLeavesNoRow(t *testing.T) {
	pool := newPool(t)
	table := newTable(t, pool)
	l := pgledger.New(pool, table, map[string]int64{"EUR": 10})
	ctx := ctxT(t)
	if _, _, err := l.Pay(ctx, "ref", 0, payment("pay_1", mockserver.DefaultBalance+1, "GBP")); !errors.Is(err, mockserver.ErrInsufficientFunds) {
		t.Fatalf("Pay over the default balance = %v, want ErrInsufficientFunds", err)
	}
	if _, _, err := l.Pay(ctx, "ref-eur", 0, payment("pay_2", 11, "EUR")); !errors.Is(err, mockserver.ErrInsufficientFunds) {
		t.Fatalf("Pay over the opening balance = %v, want ErrInsufficientFunds", err)
	}
	if n := scalar(t, pool, `SELECT count(*) FROM "`+table+`_balances"`); n != 0 {
		t.Errorf("%d balance rows after refused payments, want 0", n)
	}
	bals, err := l.Balances(ctx)
	if err != nil || len(bals) != 1 || bals["EUR"] != 10 {
		t.Errorf("Balances = %v, %v; want only EUR 10", bals, err)
	}
	for _, bad := range []int64{0, -5} {
		if _, _, err := l.Pay(ctx, "ref-bad", 0, payment("pay_bad", bad, "EUR")); err == nil {
			t.Errorf("Pay of %d succeeded", bad)
		}
	}
}

// Pay answers the payment as stored, Created in UTC to the millisecond.
func TestCreatedStoredToTheMillisecond(t *testing.T) {
	pool := newPool(t)
	ledgertest.CreatedAsStored(t, pgledger.New(pool, newTable(t, pool), nil))
}

// Two payments with one ID under different refs: the second is refused,
// by the table's unique constraint, and changes nothing.
func TestPayRefusesATakenID(t *testing.T) {
	pool := newPool(t)
	if err := ledgertest.TakenIDRefused(t, pgledger.New(pool, newTable(t, pool), nil)); !isUniqueViolation(err) {
		t.Errorf("Pay with a taken ID = %v, want the unique violation", err)
	}
}

// TestLapsedRefRenamed: once a payment's ref lapsed, a new payment under
// the ref renames the old one's to ref/lapsed/ID, in transactional mode
// too, so that the unique ref column names the new payment; the old one
// stays, with its amount.
func TestLapsedRefRenamed(t *testing.T) {
	pool := newPool(t)
	l := pgledger.New(pool, newTable(t, pool), nil)
	ctx := ctxT(t)
	const keep = time.Minute
	old := payment("pay_old", 5, "EUR")
	if _, _, err := l.Pay(ctx, "ref", keep, old); err != nil {
		t.Fatal(err)
	}
	txCtx, tx := joined(t, pool)
	p := payment("pay_new", 7, "EUR")
	p.Created = old.Created.Add(keep)
	if got, found, err := l.Pay(txCtx, "ref", keep, p); err != nil || found || got.ID != "pay_new" || got.Ref != "ref" {
		t.Fatalf("Pay after the keep = %+v, found %v, %v; want pay_new under ref", got, found, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, ok, err := l.Payment(ctx, "pay_old")
	if err != nil || !ok || got.Ref != "ref/lapsed/pay_old" || got.Amount != 5 {
		t.Fatalf("the lapsed payment = %+v, %v, %v; want its ref renamed", got, ok, err)
	}
	if b, err := l.Balance(ctx, "EUR"); err != nil || b != mockserver.DefaultBalance-12 {
		t.Fatalf("EUR balance %d, %v; want both payments debited", b, err)
	}
}

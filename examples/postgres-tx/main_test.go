package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/saferetry/saferetry/examples/internal/exampletest"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestMain checks the test database once before any test runs, and says how many
// tests skipped without it; see testenv.Main.
func TestMain(m *testing.M) { testenv.Main(m, testenv.Postgres) }

func TestRunReportsBadAddressFirst(t *testing.T) {
	// Nothing listens on port 1: were the address not checked first, the
	// error would be about the database.
	err := run(context.Background(), "256.0.0.1:1", "postgres://postgres@127.0.0.1:1/none?sslmode=disable", io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-addr") {
		t.Fatalf("run with a bad address = %v, want an -addr error", err)
	}
}

// schemaURL creates a PostgreSQL schema of the test's own, dropped with
// everything in it at cleanup, and returns the test database URL with that
// schema as the search_path: the example's fixed table names then land in
// it, away from anyone else using the database.
func schemaURL(t *testing.T) string {
	t.Helper()
	base := testenv.PostgresURL(t)
	schema := testenv.RandomName("example_pgtx_")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		testenv.Unavailable(t, "postgres unreachable ("+err.Error()+"); start it to run")
	}
	if _, err := pool.Exec(ctx, `CREATE SCHEMA "`+schema+`"`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestRunTransfersOnceReplaysAndShutsDown runs the example against the test
// database: a transfer commits once, its retry is replayed and moves no more
// money, the same key with another body is refused, an overdraft is a
// stored 402, and cancelling the context shuts the server down.
func TestRunTransfersOnceReplaysAndShutsDown(t *testing.T) {
	dbURL := schemaURL(t)
	base, shutdown := exampletest.Start(t, func(ctx context.Context, out io.Writer) error {
		return run(ctx, "127.0.0.1:0", dbURL, out)
	})

	transfer := func(key, body string) testenv.Reply {
		t.Helper()
		return exampletest.Post(t, base+"/transfers", key, body)
	}
	balances := func() map[string]int64 {
		t.Helper()
		resp, err := http.Get(base + "/accounts")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rows []struct {
			Name    string `json:"name"`
			Balance int64  `json:"balance"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil {
			t.Fatalf("GET /accounts: %v", err)
		}
		m := map[string]int64{}
		for _, r := range rows {
			m[r.Name] = r.Balance
		}
		return m
	}

	const move = `{"from":"alice","to":"bob","amount":250}`
	first := transfer("t-1", move)
	if first.Status != http.StatusCreated || first.Replayed {
		t.Fatalf("first transfer = %+v, want a fresh 201", first)
	}
	if again := transfer("t-1", move); again.Status != http.StatusCreated || !again.Replayed || again.Body != first.Body {
		t.Errorf("retry = %+v, want the replay of %q", again, first.Body)
	}
	if other := transfer("t-1", `{"from":"alice","to":"bob","amount":1}`); other.Status != http.StatusUnprocessableEntity {
		t.Errorf("same key, other body = %+v, want 422", other)
	}
	over := transfer("t-2", `{"from":"alice","to":"bob","amount":1000000}`)
	if over.Status != http.StatusPaymentRequired {
		t.Errorf("overdraft = %+v, want 402", over)
	}
	if again := transfer("t-2", `{"from":"alice","to":"bob","amount":1000000}`); again.Status != http.StatusPaymentRequired || !again.Replayed {
		t.Errorf("overdraft retry = %+v, want the replayed 402", again)
	}
	if got := balances(); got["alice"] != 10000-250 || got["bob"] != 10000+250 {
		t.Errorf("balances %v, want alice 9750 and bob 10250: one transfer, moved once", got)
	}

	shutdown("/accounts")
}

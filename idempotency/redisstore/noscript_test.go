package redisstore_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

// TestEveryScriptRunsAfterScriptFlush: every operation, run on a server
// whose script cache was flushed just before (as after SCRIPT FLUSH, a
// restart or a failover to a primary that never ran the scripts), gets
// NOSCRIPT for its EVALSHA and is sent again as EVAL: it succeeds, with
// and without WithWait (whose pipelines send the script; without a
// replica its writes then end in ErrNotReplicated, not in NOSCRIPT). The
// Store sends its scripts itself rather than through go-redis's
// Script.Run, so this fallback is its own.
func TestEveryScriptRunsAfterScriptFlush(t *testing.T) {
	rdb := ownRedis(t) // its own server: flushing its scripts disturbs nobody
	for _, w := range []struct {
		name string
		opts []redisstore.Option
	}{
		{"no wait", nil},
		{"WithWait(1, 50ms)", []redisstore.Option{redisstore.WithWait(1, 50*time.Millisecond)}},
	} {
		t.Run(w.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s := redisstore.New(rdb, append([]redisstore.Option{redisstore.WithPrefix(newPrefix(t, rdb))}, w.opts...)...)
			check := func(op string, err error) {
				t.Helper()
				if err != nil && (w.opts == nil || !errors.Is(err, redisstore.ErrNotReplicated)) {
					t.Fatalf("%s after SCRIPT FLUSH: %v", op, err)
				}
			}
			flush := func() {
				t.Helper()
				if err := rdb.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			k := idempotency.Key{Scope: "s", Key: "k"}
			flush()
			_, _, err := s.Get(ctx, k)
			check("Get", err)
			for _, fp := range []string{"v1:" + strings.Repeat("0123456789abcdef", 4), "not a digest"} {
				k.Key = fp
				flush()
				r, err := s.Claim(ctx, k, fp, 10*time.Second, time.Minute)
				check("Claim", err)
				if w.opts != nil {
					continue // the claim was given back: ErrNotReplicated
				}
				if !r.Acquired {
					t.Fatalf("Claim after SCRIPT FLUSH: %+v, want acquired", r)
				}
				flush()
				_, stop, err := s.Watch(ctx, k)
				check("Watch", err)
				stop()
				flush()
				check("Renew", s.Renew(ctx, k, r.Token, 20*time.Second))
				flush()
				if fp == "not a digest" {
					check("Release", s.Release(ctx, k, r.Token))
					continue
				}
				check("Complete", s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Header: http.Header{"A": {"b"}}, Body: []byte("x")}, time.Minute))
				flush()
				e, found, err := s.Get(ctx, k)
				check("Get", err)
				if !found || e.State != idempotency.StateCompleted || e.Response == nil || e.Response.Status != 201 || e.Fingerprint != fp {
					t.Fatalf("Get after SCRIPT FLUSH: %+v, %v; want the completed entry", e, found)
				}
			}
		})
	}
}

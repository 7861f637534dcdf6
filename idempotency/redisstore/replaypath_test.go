package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/idempotency/storetest"
	"github.com/saferetry/saferetry/internal/replaymix"
)

// TestReplayPathFollowsTheMix drives a store through a window of replays
// and then a window of first executions, and checks which commands each
// claim sends: by default a replay reads first (the HMGET alone) once a
// window of claims was mostly replays, and a first execution goes back to
// the claim script alone (no HMGET) once a window was mostly first
// executions; WithoutReplayFastPath always runs the script, and
// WithReplayFastPath always reads first.
func TestReplayPathFollowsTheMix(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []redisstore.Option
		// what the last replay of a window of them, the first replay
		// after it, and a first execution after a window of them send.
		lastReplay, afterReplays, afterFirsts string
	}{
		{"default", nil, "EVALSHA", "HMGET", "EVALSHA EVALSHA"},
		{"without", []redisstore.Option{redisstore.WithoutReplayFastPath()}, "EVALSHA", "EVALSHA", "EVALSHA EVALSHA"},
		{"with", []redisstore.Option{redisstore.WithReplayFastPath()}, "HMGET", "HMGET", "HMGET EVALSHA EVALSHA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rdb, _ := newStore(t, tc.opts...)
			rec := &commandNames{}
			rdb.AddHook(rec)
			ctx := context.Background()
			complete := func(k idempotency.Key) {
				t.Helper()
				r := mustClaim(t, s, k, "fp", longLease, longTTL)
				if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte("done")}, longTTL); err != nil {
					t.Fatal(err)
				}
			}
			sent := func(call func()) string {
				t.Helper()
				rec.reset()
				call()
				return strings.Join(rec.list(), " ")
			}
			done := idempotency.Key{Key: "done"}
			replay := func() {
				t.Helper()
				if r := mustClaim(t, s, done, "fp", longLease, longTTL); r.Acquired || r.Entry.Response == nil || string(r.Entry.Response.Body) != "done" {
					t.Fatalf("replay: %+v", r)
				}
			}
			firsts := func(n int, name string) {
				for i := range n {
					complete(idempotency.Key{Key: fmt.Sprint(name, i)})
				}
			}
			firsts(replaymix.Window, "warm") // a whole window, which also loads the scripts
			complete(done)                   // the next window's first claim
			for range replaymix.Window - 2 {
				replay()
			}
			if got := sent(replay); got != tc.lastReplay {
				t.Errorf("the window's last replay sent %q, want %q", got, tc.lastReplay)
			}
			if got := sent(replay); got != tc.afterReplays {
				t.Errorf("after a window of replays, a replay sent %q, want %q", got, tc.afterReplays)
			}
			firsts(replaymix.Window, "first")
			if got := sent(func() { firsts(1, "last") }); got != tc.afterFirsts {
				t.Errorf("after a window of first executions, a first execution sent %q, want %q", got, tc.afterFirsts)
			}
		})
	}
}

// TestReplayPathConformance runs the conformance suite on a store that was
// made to read first by a window of replays, so that every case of the
// suite goes through the adaptive path as it is when replays are frequent.
func TestReplayPathConformance(t *testing.T) {
	redisOptions(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s, _, _ := newStore(t)
		k := idempotency.Key{Key: "storm"}
		r := mustClaim(t, s, k, "fp", longLease, longTTL)
		if err := s.Complete(context.Background(), k, r.Token, idempotency.Response{Status: 201}, longTTL); err != nil {
			t.Fatal(err)
		}
		for range replaymix.Window - 1 {
			if r := mustClaim(t, s, k, "fp", longLease, longTTL); r.Acquired {
				t.Fatalf("replay acquired: %+v", r)
			}
		}
		return s
	}, storetest.Watching)
}

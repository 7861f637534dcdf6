package redisstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/idempotency/storetest"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
	"github.com/saferetry/saferetry/internal/replaymix"
)

// TestReplayPathFollowsTheMix checks which commands each claim sends as
// the share of replays changes (scenario.ReplayPathFollowsTheMix): by
// default a replay reads first (the GET alone) once a window of claims was
// mostly replays, and stays so while they are; a first execution goes back
// to the claim script alone once a window was mostly first executions, and
// claims of an entry in progress do not count as replays;
// WithoutReplayFastPath always runs the script, and WithReplayFastPath
// always reads first.
func TestReplayPathFollowsTheMix(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []redisstore.Option
		want scenario.ReplayPathWant
	}{
		{"default", nil, scenario.ReplayPathWant{LastReplay: "EVALSHA", AfterReplays: "GET", AfterFirsts: "EVALSHA EVALSHA", AfterBusy: "EVALSHA"}},
		{"without", []redisstore.Option{redisstore.WithoutReplayFastPath()}, scenario.ReplayPathWant{LastReplay: "EVALSHA", AfterReplays: "EVALSHA", AfterFirsts: "EVALSHA EVALSHA", AfterBusy: "EVALSHA"}},
		{"with", []redisstore.Option{redisstore.WithReplayFastPath()}, scenario.ReplayPathWant{LastReplay: "GET", AfterReplays: "GET", AfterFirsts: "GET EVALSHA EVALSHA", AfterBusy: "GET"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rdb, _ := newStore(t, tc.opts...)
			rec := &commandNames{}
			rdb.AddHook(rec)
			ctx := context.Background()
			done := idempotency.Key{Key: "done"}
			scenario.ReplayPathFollowsTheMix(t, scenario.ReplayPathSteps{
				First: func(t *testing.T, name string) {
					k := idempotency.Key{Key: name}
					r := mustClaim(t, s, k, "fp", longLease, longTTL)
					if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte("done")}, longTTL); err != nil {
						t.Fatal(err)
					}
				},
				Replay: func(t *testing.T) {
					if r := mustClaim(t, s, done, "fp", longLease, longTTL); r.Acquired || r.Entry.Response == nil || string(r.Entry.Response.Body) != "done" {
						t.Fatalf("replay: %+v", r)
					}
				},
				Hold: func(t *testing.T, name string) {
					if r := mustClaim(t, s, idempotency.Key{Key: name}, "fp", longLease, longTTL); !r.Acquired {
						t.Fatalf("claim of a new key: %+v", r)
					}
				},
				Busy: func(t *testing.T, name string) {
					if r := mustClaim(t, s, idempotency.Key{Key: name}, "other", longLease, longTTL); r.Acquired || r.Entry.State != idempotency.StateInProgress {
						t.Fatalf("claim of a key in progress: %+v", r)
					}
				},
				Sent: func(call func()) string {
					rec.reset()
					call()
					return strings.Join(rec.list(), " ")
				},
			}, tc.want)
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

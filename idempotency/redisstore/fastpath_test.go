package redisstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/idempotency/storetest"
	"github.com/saferetry/saferetry/idempotency/storetest/scenario"
	"github.com/saferetry/saferetry/internal/headercodec"
)

// TestReplayFastPathConformance runs the conformance suite on a store that
// answers completed entries from a plain GET.
func TestReplayFastPathConformance(t *testing.T) {
	redisOptions(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		s, _, _ := newStore(t, redisstore.WithReplayFastPath())
		return s
	}, storetest.Watching)
}

// TestReplayFastPathAnswersLikeClaim puts a key in each state the fast path
// must either answer or leave to the claim script, and checks that a store
// with the fast path answers as one without it: a completed entry (either
// fingerprint, the previous format too) from the GET, anything else
// (absent, in progress, lapsed, released, expired) from the script, which
// acquires or takes over.
func TestReplayFastPathAnswersLikeClaim(t *testing.T) {
	plain, rdb, prefix := newStore(t, redisstore.WithoutReplayFastPath())
	fast := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithReplayFastPath())
	ctx := context.Background()
	complete := func(t *testing.T, k idempotency.Key, fp, body string) {
		r := mustClaim(t, plain, k, fp, longLease, longTTL)
		if err := plain.Complete(ctx, k, r.Token, idempotency.Response{Status: 201, Body: []byte(body)}, longTTL); err != nil {
			t.Fatal(err)
		}
	}
	old := strconv.FormatInt(time.Now().UnixMicro()-10e6, 10)
	// Keys are in scope "", the scope entryName names.
	scenario.FastPathAnswers(t, plain, fast, "", []scenario.KeyState{
		{Name: "absent", Setup: func(*testing.T, idempotency.Key) {}, Want: scenario.Answer{Acquired: true}},
		{Name: "in progress", Setup: func(t *testing.T, k idempotency.Key) { mustClaim(t, plain, k, "fp", longLease, longTTL) },
			Want: scenario.Answer{State: idempotency.StateInProgress, Fingerprint: "fp"}},
		{Name: "lapsed", Setup: func(t *testing.T, k idempotency.Key) {
			mustClaim(t, plain, k, "fp", longLease, longTTL)
			moveLease(t, rdb, entryName(prefix, k.Key), time.Now().UnixMicro()-10e6)
		}, Want: scenario.Answer{Acquired: true, TookOver: true}},
		{Name: "released", Setup: func(t *testing.T, k idempotency.Key) {
			r := mustClaim(t, plain, k, "fp", longLease, longTTL)
			if err := plain.Release(ctx, k, r.Token); err != nil {
				t.Fatal(err)
			}
		}, Want: scenario.Answer{Acquired: true}},
		{Name: "completed", Setup: func(t *testing.T, k idempotency.Key) { complete(t, k, "fp", "done") },
			Want: scenario.Answer{State: idempotency.StateCompleted, Fingerprint: "fp", Body: "done"}},
		{Name: "completed, other fingerprint", Setup: func(t *testing.T, k idempotency.Key) { complete(t, k, "fp-other", "other") },
			Want: scenario.Answer{State: idempotency.StateCompleted, Fingerprint: "fp-other", Body: "other"}},
		{Name: "completed, previous format", Setup: func(t *testing.T, k idempotency.Key) {
			writePrevious(t, rdb, prefix, k, "st", "c", "fp", "fp", "tok", old, "code", "201",
				"hdr", headercodec.Append(nil, http.Header{"A": {"b"}}), "body", "before")
		}, Want: scenario.Answer{State: idempotency.StateCompleted, Fingerprint: "fp", Body: "before"}},
		{Name: "expired", Setup: func(t *testing.T, k idempotency.Key) {
			complete(t, k, "fp", "done")
			if err := rdb.PExpire(ctx, entryName(prefix, k.Key), time.Millisecond).Err(); err != nil {
				t.Fatal(err)
			}
			for rdb.Exists(ctx, entryName(prefix, k.Key)).Val() == 1 {
				time.Sleep(time.Millisecond)
			}
		}, Want: scenario.Answer{Acquired: true}},
	}, func(t *testing.T, s idempotency.Store, k idempotency.Key) idempotency.ClaimResult {
		return mustClaim(t, s, k, "fp", longLease, longTTL)
	})
}

// TestReplayFastPathDuringCompletion reads a key with the fast path from
// several goroutines while its claim completes: every answer is the claim
// in progress (left to the script, which refuses it) or the completed
// entry with its response, never an acquisition.
func TestReplayFastPathDuringCompletion(t *testing.T) {
	plain, rdb, prefix := newStore(t, redisstore.WithoutReplayFastPath())
	fast := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithReplayFastPath())
	ctx := context.Background()
	k := idempotency.Key{Scope: "s", Key: "racing"}
	r := mustClaim(t, plain, k, "fp", longLease, longTTL)
	want := idempotency.Response{Status: 201, Header: http.Header{"X": {"y"}}, Body: []byte("paid")}
	done := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for seen := false; !seen; {
				select {
				case <-done:
					seen = true // one more read after the completion
				default:
				}
				res, err := fast.Claim(ctx, k, "fp", longLease, longTTL)
				switch {
				case err != nil:
					errs <- err
					return
				case res.Acquired:
					errs <- fmt.Errorf("the fast path acquired a key in progress or completed: %+v", res)
					return
				case res.Entry.State == idempotency.StateCompleted && (res.Entry.Response == nil || !reflect.DeepEqual(*res.Entry.Response, want)):
					errs <- fmt.Errorf("completed entry answered as %+v, want %+v", res.Entry.Response, want)
					return
				case seen && res.Entry.State != idempotency.StateCompleted:
					errs <- fmt.Errorf("after Complete returned, Claim answered %+v", res)
					return
				}
			}
		})
	}
	time.Sleep(5 * time.Millisecond) // let the readers see the claim in progress
	if err := plain.Complete(ctx, k, r.Token, want, longTTL); err != nil {
		t.Fatal(err)
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReplayFastPathRoundTrips checks what the fast path costs through the
// middleware: a replay is one GET and no script; a first execution is
// the GET that finds nothing, then the claim and completion scripts
// (no pipeline: each command is one round trip).
func TestReplayFastPathRoundTrips(t *testing.T) {
	s, rdb, _ := newStore(t, redisstore.WithReplayFastPath())
	warmScripts(t, s)
	rec := &commandNames{}
	rdb.AddHook(rec)
	h := idempotency.Middleware(s)(benchHandler())
	for _, step := range []struct {
		name, replayed, want string
	}{
		{"first execution", "", "GET EVALSHA EVALSHA"},
		{"replay", "true", "GET"},
	} {
		rec.reset()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, benchRequest("fast-rt-1"))
		if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != step.replayed {
			t.Fatalf("%s: answered %d replayed=%q", step.name, w.Code, w.Header().Get(idempotency.HeaderReplayed))
		}
		if got := strings.Join(rec.list(), " "); got != step.want {
			t.Errorf("%s sent %q to Redis, want %q", step.name, got, step.want)
		}
	}
}

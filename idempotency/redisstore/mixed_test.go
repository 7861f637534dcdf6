package redisstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// previousVersion runs the scripts of the last version that kept entries
// in hashes (13296ce), as its Store sent them: testdata/hashformat holds
// their Lua verbatim. Its methods take what that Store's took and answer
// the scripts' raw results.
type previousVersion struct {
	rdb     *redis.Client
	prefix  string
	scripts map[string]*redis.Script
}

func newPreviousVersion(t *testing.T, rdb *redis.Client, prefix string) *previousVersion {
	p := &previousVersion{rdb: rdb, prefix: prefix, scripts: make(map[string]*redis.Script)}
	for _, name := range []string{"claim", "renew", "complete", "release", "watch", "get"} {
		src, err := os.ReadFile(filepath.Join("testdata", "hashformat", name+".lua"))
		if err != nil {
			t.Fatal(err)
		}
		p.scripts[name] = redis.NewScript(string(src))
	}
	return p
}

func (p *previousVersion) run(name, key string, args ...any) (any, error) {
	return p.scripts[name].Run(context.Background(), p.rdb, []string{entryName(p.prefix, key)}, args...).Result()
}

// claim claims key with the fingerprint "fp" (stored form "\x00fp"),
// answering the token it acquired, or 0 and the script's error.
func (p *previousVersion) claim(key string, lease time.Duration) (int64, error) {
	res, err := p.run("claim", key, "\x00fp", lease.Microseconds(), time.Hour.Milliseconds())
	if err != nil {
		return 0, err
	}
	tok, ok := res.(int64)
	if !ok || tok == 0 {
		return 0, errors.New("not acquired")
	}
	return max(tok, -tok), nil
}

// complete stores a 201 with body for the claim of tok, answering 1 when
// stored and 0 when stale.
func (p *previousVersion) complete(key string, tok int64, body string) (any, error) {
	return p.run("complete", key, tok, time.Hour.Milliseconds(), p.prefix+"settled", "code", 201, "body", body)
}

// TestMixedVersions runs this version beside the scripts of the previous
// one on one prefix, as during a rolling upgrade. This version reads the
// previous one's entries in every state it writes them and follows its
// claims: one in progress blocks, its completion replays (by the claim
// script and the fast path), its release lets a claim acquire with a
// greater token, a waiter here is woken by its completion, and one whose
// lease lapsed is taken over, after which the previous holder's
// completion fails instead of storing. The previous version fails closed
// on every entry this one writes: its claim and get fail with WRONGTYPE,
// so its middleware answers 503 and runs nothing (and so do its renew,
// complete, release and watch, which read the entry first the same way).
// Nothing executes twice either way.
func TestMixedVersions(t *testing.T) {
	s, rdb, prefix := newStore(t)
	fast := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithReplayFastPath())
	old := newPreviousVersion(t, rdb, prefix)
	ctx := context.Background()
	key := func(name string) idempotency.Key { return idempotency.Key{Key: name} }

	// A claim of the previous version, in progress, then completed.
	tok, err := old.claim("a", time.Minute)
	if err != nil {
		t.Fatalf("previous claim of a new key: %v", err)
	}
	if res := mustClaim(t, s, key("a"), "fp", longLease, longTTL); res.Acquired || res.Entry.State != idempotency.StateInProgress ||
		res.Entry.Fingerprint != "fp" || res.Entry.Token != tok {
		t.Errorf("Claim of a previous claim in progress = %+v, want blocked by token %d", res, tok)
	}
	ch, stop, err := s.Watch(ctx, key("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if res, err := old.complete("a", tok, "done"); err != nil || res != int64(1) {
		t.Fatalf("previous complete = %v %v", res, err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Error("a waiter of this version was not woken by the previous version's completion")
	}
	for name, st := range map[string]*redisstore.Store{"claim script": s, "fast path": fast} {
		res := mustClaim(t, st, key("a"), "fp", longLease, longTTL)
		if res.Acquired || res.Entry.State != idempotency.StateCompleted || res.Entry.Response == nil ||
			res.Entry.Response.Status != 201 || string(res.Entry.Response.Body) != "done" {
			t.Errorf("%s: Claim of a previous completion = %+v, want its replay", name, res)
		}
	}

	// A claim of the previous version, released.
	tok, err = old.claim("r", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := old.run("release", "r", tok, prefix+"settled"); err != nil || res != int64(1) {
		t.Fatalf("previous release = %v %v", res, err)
	}
	if res := mustClaim(t, s, key("r"), "fp", longLease, longTTL); !res.Acquired || res.TookOver || res.Token <= tok {
		t.Errorf("Claim after a previous release = %+v, want acquired anew with a token over %d", res, tok)
	}

	// A claim of the previous version whose lease lapsed, taken over here.
	tok, err = old.claim("lapsed", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the previous claim's lease to lapse", func() bool {
		e, _, err := s.Get(ctx, key("lapsed"))
		return err == nil && e.LeaseRemaining <= 0
	})
	res := mustClaim(t, s, key("lapsed"), "fp", longLease, longTTL)
	if !res.Acquired || !res.TookOver || res.Token <= tok {
		t.Fatalf("Claim of a lapsed previous claim = %+v, want a takeover with a token over %d", res, tok)
	}
	if got, err := old.complete("lapsed", tok, "late"); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Errorf("the previous holder's complete after the takeover = %v %v, want WRONGTYPE", got, err)
	}
	if err := s.Complete(ctx, key("lapsed"), res.Token, idempotency.Response{Status: 201, Body: []byte("new")}, longTTL); err != nil {
		t.Fatal(err)
	}
	if e, _, err := s.Get(ctx, key("lapsed")); err != nil || e.Response == nil || string(e.Response.Body) != "new" {
		t.Errorf("Get after the takeover's completion = %+v %v, want the new holder's outcome", e, err)
	}

	// Entries of this version, in progress and completed, to the previous
	// version.
	r := mustClaim(t, s, key("b"), "fp", longLease, longTTL)
	for _, state := range []string{"in progress", "completed"} {
		if state == "completed" {
			if err := s.Complete(ctx, key("b"), r.Token, idempotency.Response{Status: 201}, longTTL); err != nil {
				t.Fatal(err)
			}
		}
		if tok, err := old.claim("b", time.Minute); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
			t.Errorf("previous claim of an entry %s here = %d %v, want WRONGTYPE", state, tok, err)
		}
		for _, script := range []string{"get", "watch", "renew", "complete", "release"} {
			if got, err := old.run(script, "b"); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
				t.Errorf("previous %s of an entry %s here = %v %v, want WRONGTYPE", script, state, got, err)
			}
		}
	}
}

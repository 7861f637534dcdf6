package redisstore_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/headercodec"
	"github.com/saferetry/saferetry/internal/testenv"
)

// hexFingerprint is a fingerprint as the middleware computes it: "v1:" and
// 64 hex digits.
var hexFingerprint = idempotency.Fingerprint(benchRequest("k"), []byte(`{"amount":1000,"currency":"EUR"}`))

// writePrevious writes k's entry (in scope "", as entryName names it) as
// the previous format of the store did: the fingerprint verbatim in field
// fp.
func writePrevious(t *testing.T, rdb *redis.Client, prefix string, k idempotency.Key, fields ...any) {
	t.Helper()
	name := entryName(prefix, k.Key)
	if err := rdb.HSet(context.Background(), name, fields...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.PExpire(context.Background(), name, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestReadsPreviousFormat: hash entries written by earlier versions (the
// fingerprint verbatim in fp, the lease and watch fields of the old
// scripts) are read as they were written: a completed one replays with its
// fingerprint, so the middleware tells a match from a mismatch; one in
// progress whose lease lapsed is taken over with the same fingerprint
// only, and is then a string entry that keeps the waiters' mark; a
// released one is claimed anew with a greater token. (TestHashEntries
// covers the hashes of the version just before, field f.)
func TestReadsPreviousFormat(t *testing.T) {
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	hdr := http.Header{"Content-Type": {"application/json"}}
	now := time.Now().UnixMicro()
	old := strconv.FormatInt(now-10e6, 10)

	done := idempotency.Key{Key: "done"}
	writePrevious(t, rdb, prefix, done, "st", "c", "fp", hexFingerprint, "tok", old,
		"code", "201", "hdr", headercodec.Append(nil, hdr), "body", `{"id":"pay_1"}`)
	want := idempotency.Response{Status: 201, Header: hdr, Body: []byte(`{"id":"pay_1"}`)}
	for _, fp := range []string{hexFingerprint, "v1:" + strconv.Itoa(0)} {
		res := mustClaim(t, s, done, fp, longLease, longTTL)
		if res.Acquired || res.Entry.State != idempotency.StateCompleted || res.Entry.Fingerprint != hexFingerprint ||
			res.Entry.Response == nil || !reflect.DeepEqual(*res.Entry.Response, want) {
			t.Errorf("Claim(%q) of a previous completed entry = %+v, want it with fingerprint %q and %+v", fp, res, hexFingerprint, want)
		}
	}
	if e, found, err := s.Get(ctx, done); err != nil || !found || e.Fingerprint != hexFingerprint || e.Response == nil {
		t.Errorf("Get of a previous completed entry = %+v %v %v", e, found, err)
	}

	for _, fp := range []string{hexFingerprint, "plain"} {
		t.Run("takeover of "+fp, func(t *testing.T) {
			k := idempotency.Key{Key: "lapsed-" + fp}
			writePrevious(t, rdb, prefix, k, "st", "p", "fp", fp, "tok", old, "lx", old, "w", "1")
			other := mustClaim(t, s, k, fp+"0", longLease, longTTL)
			if other.Acquired || other.Entry.Fingerprint != fp || other.Entry.LeaseRemaining > -9*time.Second {
				t.Fatalf("Claim with another fingerprint = %+v, want blocked by %q, lapsed 10 s ago", other, fp)
			}
			res := mustClaim(t, s, k, fp, longLease, longTTL)
			if !res.Acquired || !res.TookOver || strconv.FormatInt(res.Token, 10) <= old {
				t.Fatalf("Claim with the same fingerprint = %+v, want a takeover with a token over %s", res, old)
			}
			if typ := rdb.Type(ctx, entryName(prefix, k.Key)).Val(); typ != "string" {
				t.Fatalf("entry after takeover is a %s, want a string", typ)
			}
			if held := readHeld(t, rdb, entryName(prefix, k.Key)); held.head != "p1" || held.tok != res.Token {
				t.Errorf("entry after takeover = %+v, want held by token %d with the waiters' mark kept", held, res.Token)
			}
			if e, _, err := s.Get(ctx, k); err != nil || e.Fingerprint != fp || e.Token != res.Token {
				t.Errorf("Get after takeover = %+v %v, want fingerprint %q token %d", e, err, fp, res.Token)
			}
			if err := s.Complete(ctx, k, res.Token, idempotency.Response{Status: 200}, longTTL); err != nil {
				t.Fatal(err)
			}
		})
	}

	released := idempotency.Key{Key: "released"}
	future := strconv.FormatInt(now+60e6, 10) // a token from a clock ahead
	writePrevious(t, rdb, prefix, released, "st", "r", "tok", future)
	if res := mustClaim(t, s, released, "any", longLease, longTTL); !res.Acquired || res.TookOver || strconv.FormatInt(res.Token, 10) <= future {
		t.Errorf("Claim of a previous released entry = %+v, want acquired anew with a token over %s", res, future)
	}
}

// TestEntryMemory: a small entry, a string, takes no more memory than the
// same entry in the hash format of two versions ago stored as a listpack
// (which it could not be by default: its 67-byte hex fingerprint is over
// hash-max-listpack-value, 64), the figure issue 12 holds it to. It runs
// on a Redis of its own, whose listpack limit it raises to measure that
// listpack.
func TestEntryMemory(t *testing.T) {
	addr := startRedis(t, false, "--save", "", "--appendonly", "no")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	const prefix = "saferetry:idem:"
	s := redisstore.New(rdb, redisstore.WithPrefix(prefix))
	resp := idempotency.Response{
		Status: 201,
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"id":"pay_123","status":"succeeded"}`),
	}
	usage := func(name string) (string, int64) {
		enc, err := rdb.ObjectEncoding(ctx, name).Result()
		if err != nil {
			t.Fatalf("OBJECT ENCODING %s: %v", name, err)
		}
		n, err := rdb.MemoryUsage(ctx, name).Result()
		if err != nil {
			t.Fatalf("MEMORY USAGE %s: %v", name, err)
		}
		return enc, n
	}
	// The previous format of the same entries, under names of the same
	// length; the hash stays a hash table once converted, so each is
	// written afresh.
	previous := func(k idempotency.Key, tok string, completed bool) (string, int64) {
		fields := []any{"st", "p", "fp", hexFingerprint, "tok", tok, "lx", tok}
		if completed {
			fields = []any{"st", "c", "fp", hexFingerprint, "tok", tok, "code", "201",
				"hdr", headercodec.Append(nil, resp.Header), "body", resp.Body}
		}
		writePrevious(t, rdb, prefix, k, fields...)
		return usage(entryName(prefix, k.Key))
	}

	for _, completed := range []bool{false, true} {
		name := map[bool]string{false: "in progress", true: "completed"}[completed]
		k := idempotency.Key{Key: "key-0001"}
		if completed {
			k.Key = "key-0002"
		}
		res := mustClaim(t, s, k, hexFingerprint, longLease, longTTL)
		if completed {
			if err := s.Complete(ctx, k, res.Token, resp, longTTL); err != nil {
				t.Fatal(err)
			}
		}
		enc, got := usage(entryName(prefix, k.Key))
		tok := strconv.FormatInt(res.Token, 10)
		oldEnc, oldMem := previous(idempotency.Key{Key: "old-" + k.Key[4:]}, tok, completed)
		if err := rdb.ConfigSet(ctx, "hash-max-listpack-value", "128").Err(); err != nil {
			t.Fatal(err)
		}
		lpEnc, listpack := previous(idempotency.Key{Key: "lpk-" + k.Key[4:]}, tok, completed)
		if err := rdb.ConfigSet(ctx, "hash-max-listpack-value", "64").Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d B (%s); previous format %d B (%s), %d B as a %s", name, got, enc, oldMem, oldEnc, listpack, lpEnc)
		if enc != "embstr" && enc != "raw" {
			t.Errorf("a small %s entry is a %s, want a string", name, enc)
		}
		if lpEnc != "listpack" {
			t.Fatalf("the previous format's reference is a %s, want a listpack", lpEnc)
		}
		if got > listpack {
			t.Errorf("a small %s entry takes %d B, want at most %d B (the listpack of the hash format)", name, got, listpack)
		}
	}
}

// TestFingerprintForms: fingerprints of every shape come back from Get and
// Claim as they were given (the digest form, and verbatim ones that look
// almost like it), and two that differ are never taken for the same.
func TestFingerprintForms(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	digest := hexFingerprint[3:]
	forms := []string{
		hexFingerprint,
		digest,                    // the digest without a prefix
		"v2:" + digest,            // another prefix
		"v1:" + digest[:63] + "A", // not lowercase hex
		"v1:" + digest[:63],       // one digit short
		"v1:" + digest + "0",      // one too many
		"\x00" + hexFingerprint,   // starting with a form byte
		"\x01" + digest[:32],      // likewise
		"", "fp",
	}
	for i, fp := range forms {
		k := idempotency.Key{Scope: "s", Key: strconv.Itoa(i)}
		tok := mustClaim(t, s, k, fp, time.Millisecond, longTTL).Token
		testenv.Eventually(t, "lease lapse", func() bool {
			e, _, err := s.Get(ctx, k)
			return err == nil && e.LeaseRemaining <= 0
		})
		for j, other := range forms {
			if j == i {
				continue
			}
			if res := mustClaim(t, s, k, other, longLease, longTTL); res.Acquired || res.Entry.Fingerprint != fp {
				t.Fatalf("Claim(%q) over a lapsed claim of %q = %+v, want blocked, reading %q", other, fp, res, fp)
			}
		}
		res := mustClaim(t, s, k, fp, longLease, longTTL)
		if !res.Acquired || !res.TookOver || res.Token <= tok {
			t.Fatalf("Claim(%q) over its own lapsed claim = %+v, want a takeover", fp, res)
		}
		if err := s.Complete(ctx, k, res.Token, idempotency.Response{Status: 200}, longTTL); err != nil {
			t.Fatal(err)
		}
		if e, found, err := s.Get(ctx, k); err != nil || !found || e.Fingerprint != fp {
			t.Errorf("Get = %+v %v %v, want fingerprint %q", e, found, err, fp)
		}
	}
	if err := s.Complete(ctx, idempotency.Key{Scope: "s", Key: "none"}, 1, idempotency.Response{}, longTTL); !errors.Is(err, idempotency.ErrStaleToken) {
		t.Errorf("Complete of an absent key = %v", err)
	}
}

// TestHashEntries: the hash entries of the version before strings (the
// fingerprint in f, in its stored form) go on working while instances of
// that version still hold them: a claim in progress there blocks a new
// instance's claim and Get with its lease, a waiter on a new instance
// marks it as that version's scripts expect (w), and the new instance
// cannot complete, renew or release it, having no token of it; a
// completed one replays, by the claim script and by the replay fast path.
// (TestMixedVersions runs the previous version's own scripts beside this
// one, both ways.)
func TestHashEntries(t *testing.T) {
	s, rdb, prefix := newStore(t)
	fast := redisstore.New(rdb, redisstore.WithPrefix(prefix), redisstore.WithReplayFastPath())
	ctx := context.Background()
	now := time.Now().UnixMicro()
	stored := "\x00fp" // "fp" in its stored form
	tok := strconv.FormatInt(now, 10)

	held := idempotency.Key{Key: "held"}
	writePrevious(t, rdb, prefix, held, "st", "p", "f", stored, "tok", tok, "lx", strconv.FormatInt(now+60e6, 10))
	for _, fp := range []string{"fp", "other"} {
		if res := mustClaim(t, s, held, fp, longLease, longTTL); res.Acquired || res.Entry.State != idempotency.StateInProgress ||
			res.Entry.Fingerprint != "fp" || res.Entry.LeaseRemaining < 50*time.Second {
			t.Errorf("Claim(%q) of a held hash entry = %+v, want in progress, fingerprint fp, about a minute left", fp, res)
		}
	}
	if e, found, err := s.Get(ctx, held); err != nil || !found || e.State != idempotency.StateInProgress || e.Token != now {
		t.Errorf("Get of a held hash entry = %+v %v %v", e, found, err)
	}
	ch, stop, err := s.Watch(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if w := rdb.HGet(ctx, entryName(prefix, held.Key), "w").Val(); w != "1" {
		t.Errorf("Watch left w = %q in the hash, want 1", w)
	}
	for name, err := range map[string]error{
		"Renew":    s.Renew(ctx, held, now, longLease),
		"Complete": s.Complete(ctx, held, now, idempotency.Response{Status: 200}, longTTL),
		"Release":  s.Release(ctx, held, now),
	} {
		if !errors.Is(err, idempotency.ErrStaleToken) {
			t.Errorf("%s of a hash entry = %v, want ErrStaleToken", name, err)
		}
	}
	if typ := rdb.Type(ctx, entryName(prefix, held.Key)).Val(); typ != "hash" {
		t.Errorf("the held entry is now a %s, want the hash untouched", typ)
	}
	// The holder of the previous version completes it, as its script did.
	if err := rdb.HSet(ctx, entryName(prefix, held.Key), "st", "c", "code", "201", "body", "done").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Publish(ctx, prefix+"settled", entryName(prefix, held.Key)).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not woken by the previous version's publication")
	}
	for name, st := range map[string]*redisstore.Store{"claim script": s, "fast path": fast} {
		res := mustClaim(t, st, held, "fp", longLease, longTTL)
		if res.Acquired || res.Entry.State != idempotency.StateCompleted || res.Entry.Fingerprint != "fp" ||
			res.Entry.Response == nil || string(res.Entry.Response.Body) != "done" || res.Entry.Response.Header != nil {
			t.Errorf("%s: Claim of a completed hash entry = %+v, want its outcome", name, res)
		}
	}
}

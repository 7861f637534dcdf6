package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestWithWaitWhereRoleIsDenied: ROLE is an @admin and @dangerous
// command, which an application's ACL user commonly lacks (+@all
// -@dangerous); WAIT and the scripts are not. Once a WAIT came back short,
// WithWait asked ROLE instead of WAIT, and a refused ROLE failed the write
// with NOPERM: an acquiring Claim was not given back (retries were told "in
// progress" until its lease lapsed), and since only ROLE could clear the
// primary's mark, every write to it failed so, for good, even once a
// replica had joined. A write there must still be waited for: refused with
// ErrNotReplicated and given back while replicas are missing, acknowledged
// once one is back.
func TestWithWaitWhereRoleIsDenied(t *testing.T) {
	primary := ownRedis(t, "--repl-diskless-sync-delay", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := primary.Do(ctx, "ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-@dangerous").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: primary.Options().Addr, Username: "app", Password: "pw"})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Do(ctx, "ROLE").Err(); !redis.HasErrorPrefix(err, "NOPERM") {
		t.Fatalf("ROLE as the ACL user = %v, want NOPERM", err)
	}
	s := redisstore.New(rdb, redisstore.WithWait(1, 300*time.Millisecond))
	for _, key := range []string{"k1", "k2", "k3"} {
		k := idempotency.Key{Key: key}
		if _, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour); !errors.Is(err, redisstore.ErrNotReplicated) {
			t.Errorf("Claim of %s without a replica = %v, want ErrNotReplicated", key, err)
		}
		if e, found, err := s.Get(ctx, k); found || err != nil {
			t.Errorf("after the Claim of %s: Get = %+v, %v, %v; want the unreplicated claim given back", key, e, found, err)
		}
	}

	replica := ownRedis(t)
	host, port, _ := strings.Cut(primary.Options().Addr, ":")
	if err := replica.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	// A WAIT after a write of its own connection, made once the replica
	// is attached: a replica just synchronised counts as online with
	// nothing acknowledged yet, and a write made before it attached
	// leaves nothing to acknowledge.
	testenv.Eventually(t, "the replica acknowledges a write", func() bool {
		if !strings.Contains(primary.Info(ctx, "replication").Val(), "state=online") {
			return false
		}
		var wait *redis.Cmd
		_, _ = primary.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "probe", "x", 0)
			wait = p.Do(ctx, "WAIT", 1, 100)
			return nil
		})
		return wait.Val() == int64(1)
	})
	for _, key := range []string{"k4", "k5"} {
		if r, err := s.Claim(ctx, idempotency.Key{Key: key}, "fp", time.Minute, time.Hour); err != nil || !r.Acquired {
			t.Errorf("Claim of %s with a replica back = %+v, %v; want acquired", key, r, err)
		}
	}
}

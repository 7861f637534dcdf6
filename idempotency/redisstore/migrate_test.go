package redisstore_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

// TestClusterSlotMigrating runs a store through a slot that is being
// migrated key by key, as redis-cli --cluster reshard does, and left half
// done (an interrupted reshard stays so until someone fixes it): the
// source node is MIGRATING, the target IMPORTING, and the entry of a claim
// in progress has already been moved by MIGRATE. The source answers ASK
// for every key it no longer holds: the held claim must still renew and
// complete, and a new key of the slot must still be claimed, with and
// without WithWait, whose pipeline goes to one node and so does not
// follow ASK the way go-redis does for the commands it routes itself.
func TestClusterSlotMigrating(t *testing.T) {
	c := startOwnCluster(t)
	ctx := context.Background()
	for _, w := range waitOptions {
		t.Run(w.name, func(t *testing.T) {
			rdb := newClusterClient(t, c.addrs)
			prefix := newPrefix(t, rdb)
			s := redisstore.New(rdb, append([]redisstore.Option{redisstore.WithPrefix(prefix)}, w.opts...)...)
			held := idempotency.Key{Key: "migrated"}
			name := entryName(prefix, held.Key)
			slot := int(crc16(name) % 16384)
			if got, err := rdb.ClusterKeySlot(ctx, name).Result(); err != nil || got != int64(slot) {
				t.Fatalf("CLUSTER KEYSLOT %q = %d, %v; crc16 says %d", name, got, err, slot)
			}
			fresh := idempotency.Key{Key: sameSlotKey(prefix, "fresh-", slot)}

			res := mustClaim(t, s, held, "fp", longLease, longTTL)
			if !res.Acquired {
				t.Fatalf("Claim = %+v; want it acquired", res)
			}
			from, to := migrateHalfway(t, rdb, slot, name)
			t.Logf("slot %d migrating from %s to %s, %q moved", slot, from, to, name)

			if err := s.Renew(ctx, held, res.Token, longLease); err != nil {
				t.Errorf("Renew of the moved entry: %v", err)
			}
			if err := s.Complete(ctx, held, res.Token, idempotency.Response{Status: 201, Body: []byte("done")}, longTTL); err != nil {
				t.Errorf("Complete of the moved entry: %v", err)
			}
			if e, found, err := s.Get(ctx, held); err != nil || !found || e.State != idempotency.StateCompleted {
				t.Errorf("Get after Complete = %+v, %v, %v; want it completed", e, found, err)
			}
			got, err := s.Claim(ctx, fresh, "fp", longLease, longTTL)
			if err != nil || !got.Acquired {
				t.Errorf("Claim of a new key of the migrating slot = %+v, %v; want it acquired", got, err)
			}
			if err == nil && got.Acquired {
				if err := s.Release(ctx, fresh, got.Token); err != nil {
					t.Errorf("Release of the new key: %v", err)
				}
			}
		})
	}
}

// migrateHalfway opens the migration of slot to another primary (target
// IMPORTING, source MIGRATING) and moves the key name with MIGRATE, leaving
// the slot migrating; it returns the addresses of the source and target.
func migrateHalfway(t *testing.T, rdb *redis.ClusterClient, slot int, name string) (string, string) {
	t.Helper()
	ctx := context.Background()
	src, err := rdb.MasterForKey(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	from := src.Options().Addr
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	to := ""
	for _, s := range slots {
		if addr := s.Nodes[0].Addr; addr != from {
			to = addr
			break
		}
	}
	if to == "" {
		t.Fatal("no second primary")
	}
	dst := redis.NewClient(&redis.Options{Addr: to})
	defer dst.Close()
	fromID, toID := src.Do(ctx, "CLUSTER", "MYID").Val(), dst.Do(ctx, "CLUSTER", "MYID").Val()
	host, port, _ := net.SplitHostPort(to)
	for _, step := range []struct {
		node *redis.Client
		args []any
	}{
		{dst, []any{"CLUSTER", "SETSLOT", slot, "IMPORTING", fromID}},
		{src, []any{"CLUSTER", "SETSLOT", slot, "MIGRATING", toID}},
		{src, []any{"MIGRATE", host, port, "", 0, 5000, "KEYS", name}},
	} {
		if err := step.node.Do(ctx, step.args...).Err(); err != nil {
			t.Fatalf("%v on %s: %v", step.args, step.node.Options().Addr, err)
		}
	}
	return from, to
}

// sameSlotKey returns a client key, starting with stem, whose entry under
// prefix (scope "") falls in slot.
func sameSlotKey(prefix, stem string, slot int) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s%d", stem, i)
		if int(crc16(entryName(prefix, k))%16384) == slot {
			return k
		}
	}
}

// crc16 is Redis Cluster's key hash (CRC16-XMODEM) of a name whose hash
// tag, if any, is empty (as every entry's "{}" is): the whole name.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

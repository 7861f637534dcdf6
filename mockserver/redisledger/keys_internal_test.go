package redisledger

import (
	"strings"
	"testing"
)

// ClusterSlot is clusterSlot, for the external tests.
var ClusterSlot = clusterSlot

// clusterSlot returns the Redis Cluster slot of key: CRC16 (XMODEM) of its
// hash tag, or of the whole key when it has none, modulo 16384.
func clusterSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

func TestClusterSlot(t *testing.T) {
	// Values from CLUSTER KEYSLOT on a Redis 7 cluster.
	for key, want := range map[string]int{
		"foo": 12182, "bar": 5061, "hello": 866,
		"{user1000}.following": 3443, "{user1000}.followers": 3443,
		"foo{}{bar}": 8363, "foo{{bar}}zap": 4015,
	} {
		if got := clusterSlot(key); got != want {
			t.Errorf("clusterSlot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestKeysShareOneSlot(t *testing.T) {
	for _, prefix := range []string{"", "a:", "saferetry:mock:ns:", "ünï:cödé:"} {
		ks := newKeys(prefix).all()
		tag := prefix + "ledger"
		for _, k := range ks {
			if !strings.HasPrefix(k, prefix+"{"+tag+"}:") {
				t.Errorf("prefix %q: key %q does not start with the prefix and the tag {%s}", prefix, k, tag)
			}
			if got, want := clusterSlot(k), clusterSlot("{"+tag+"}"); got != want {
				t.Errorf("prefix %q: key %q in slot %d, want %d", prefix, k, got, want)
			}
			// A redisstore.Store under the same prefix names its entries
			// prefix + "{}...": never one of these.
			if strings.HasPrefix(k, prefix+"{}") {
				t.Errorf("prefix %q: key %q could clash with a redisstore entry", prefix, k)
			}
		}
	}
	if a, b := clusterSlot(newKeys("ns-a:").refs), clusterSlot(newKeys("ns-b:").refs); a == b {
		t.Errorf("ledgers with prefixes ns-a: and ns-b: share slot %d; the tag should spread them", a)
	}
}

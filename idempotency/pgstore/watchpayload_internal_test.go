package pgstore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
)

// TestWatchPayloadUnchanged pins the notification payload of an entry to
// the form every version sends and listens for (the hex of the first 16
// bytes of SHA-256 over the scope's length as a uvarint, the scope and
// the key): instances of two versions share a table during a rolling
// deploy, and a waiter on one must hear the other's completions. Scopes
// and keys longer than payload's stack buffer are in it too.
func TestWatchPayloadUnchanged(t *testing.T) {
	want := func(scope, key string) string {
		h := sha256.New()
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(scope)))])
		h.Write([]byte(scope))
		h.Write([]byte(key))
		return hex.EncodeToString(h.Sum(nil)[:16])
	}
	var w watcher
	for _, c := range []struct{ scope, key string }{
		{"", ""}, {"bench", "k1"}, {"ab", "c"}, {"a", "bc"},
		{"POST /orders", "8c1f3f2e-5d6b-4c59-9a7e-0f3c2b1a9d8e"},
		{strings.Repeat("s", 200), "k"}, {"s", strings.Repeat("k", 5000)}, {"é\\x00", "ключ"},
	} {
		if got := w.payload(c.scope, c.key); got != want(c.scope, c.key) {
			t.Errorf("payload(%.20q, %.20q) = %s, want %s", c.scope, c.key, got, want(c.scope, c.key))
		}
	}
}

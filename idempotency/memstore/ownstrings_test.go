package memstore_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

// TestKeepsStringsOfItsOwn: a key the store is given may be a slice of a
// much larger string (the middleware's key is a slice of the header value,
// and an sf-string's parameters may run to the server's header limit). The
// store must keep strings of its own, in its map and in its expiry queue
// (here a completion with a shorter ttl queues an item under the key the
// completing request gave), or its byte bound counts a few bytes per
// entry while the heap keeps the whole header. Before the fix, 64 entries
// under a 1 MiB bound kept 17 MB. Found by a review helper.
func TestKeepsStringsOfItsOwn(t *testing.T) {
	const bound = 1 << 20
	s := memstore.New(memstore.WithMaxBytes(bound), memstore.WithCleanupInterval(0))
	defer s.Close()
	ctx := context.Background()
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	// header returns one request's header value, 256 KiB, and the key that
	// is a slice of it.
	header := func(i int) idempotency.Key {
		h := fmt.Sprintf("key-%d;", i) + strings.Repeat("x", 256<<10)
		return idempotency.Key{Scope: h[:0], Key: h[:strings.IndexByte(h, ';')]}
	}
	before := heap()
	for i := range 64 {
		res, err := s.Claim(ctx, header(i), "v1:fp", time.Minute, time.Hour)
		if err != nil || !res.Acquired {
			t.Fatalf("claim %d: %+v %v", i, res, err)
		}
		if err := s.Complete(ctx, header(i), res.Token, idempotency.Response{Status: 201}, 30*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if grew := heap() - before; grew > 4*bound {
		t.Fatalf("64 entries accepted under a %d-byte bound, yet the live heap grew by %d bytes", bound, grew)
	}
	runtime.KeepAlive(s)
}

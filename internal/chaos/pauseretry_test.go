package chaos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoaderRetriesElsewhereWhileAnInstanceIsPaused: the pause fault stops
// an instance past its lease so that another instance takes its claims
// over, which happens only if the client gives up on the paused instance
// and retries elsewhere before the pause ends. Here the first attempt goes
// to an instance that answers only when its pause is over, as a SIGSTOPped
// process does; the retry must reach the other instance before then, or
// the pause fault never brings about a takeover and the exactly-once
// verdict under pauses is never put to the test.
func TestLoaderRetriesElsewhereWhileAnInstanceIsPaused(t *testing.T) {
	const lease = 200 * time.Millisecond
	pause := pauseFor(lease)
	begin := time.Now()
	var liveAt atomic.Int64 // when the live instance was first asked, since begin
	paused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(pause - time.Since(begin)):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"pay_paused"}`))
	}))
	defer paused.Close()
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		liveAt.CompareAndSwap(0, int64(time.Since(begin)))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"pay_live"}`))
	}))
	defer live.Close()
	// The round robin's first pick is the second address: the paused one.
	l := newLoader([]string{strings.TrimPrefix(live.URL, "http://"), strings.TrimPrefix(paused.URL, "http://")}, lease)
	defer l.close()
	o := newOps(1, "run")[0]
	l.send(context.Background(), o)
	at := time.Duration(liveAt.Load())
	if at == 0 || at >= pause {
		t.Fatalf("the live instance was asked at %v (0: never), answered %v; want a retry there before the pause of %v ended",
			at, o.ids, pause)
	}
}

package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/saferetry/saferetry/outbox"
)

// TestPublisherPanicWithTheDatabaseStalledIsBounded: the Publisher panics
// just as the database stops answering (a network cut that takes the
// broker and the database), the caller's context live. The panic ends
// the call as if its context had ended: the failed attempt that the relay
// writes, and the end of its transactions, are bounded by the settle
// timeout (WithSettleTimeout) counted from the panic, and the panic goes
// up through Run (one connection per worker, and pipelined) or RunOnce,
// rather than wait for ever on the database in a deferred function,
// where neither the caller nor a supervisor sees it.
func TestPublisherPanicWithTheDatabaseStalledIsBounded(t *testing.T) {
	const settle = 500 * time.Millisecond
	for _, tc := range []struct {
		name  string
		conns int32
		once  bool
	}{{"Run", 1, false}, {"Run pipelined", 4, false}, {"RunOnce", 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			o, pool := newOutbox(t)
			enqueue(t, pool, o, msg("m1", "k"), msg("m2", "k"))
			op, proxy := stallPool(t, o, tc.conns)
			t.Cleanup(proxy.Stop)
			pub := publisherFunc(func(context.Context, []outbox.Message) error {
				proxy.SetLatency(time.Hour)
				panic("broker and database gone")
			})
			r := op.Relay(pub, outbox.WithListen(false), outbox.WithSettleTimeout(settle))
			done := make(chan any, 1)
			start := time.Now()
			go func() {
				defer func() { done <- recover() }()
				if tc.once {
					_, _ = r.RunOnce(context.Background())
				} else {
					_ = r.Run(context.Background())
				}
			}()
			select {
			case p := <-done:
				if p == nil {
					t.Fatal("no panic went up")
				}
				t.Logf("the panic went up %v after the Publisher's", time.Since(start).Round(10*time.Millisecond))
			case <-time.After(settle + 2*time.Second):
				t.Errorf("no panic went up %v after the Publisher's, the database not answering; want about %v",
					settle+2*time.Second, settle)
				proxy.Stop() // the marks fail: the panic goes up
				<-done
			}
		})
	}
}

package jetstream

import (
	"context"
	"errors"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// pullRechecks are the bounds of the first calls of next, before it waits
// without one. nats.go's iterator (v1.55) sends a pull request from a
// goroutine of its own, and while that goroutine has not yet recorded the
// previous request as sent, a Next that finds the buffer empty sends none:
// it then waits, with no pull request on the server, until it misses two
// heartbeats (30 s with the default expiry) and resets. Each Next checks
// again when it starts, so a Next cut short and called again sends the
// missing request once that goroutine has run. On a loaded machine (CI
// under -race) the stall was seen about once in 200 runs of 50
// messages; the checks add nothing to a Next that a message answers, and
// delay the missed-heartbeat check by their sum at most.
var pullRechecks = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 250 * time.Millisecond, time.Second}

// next returns iter's next message as iter.Next(natsjs.NextContext(ctx))
// does, but calls Next again, within pullRechecks, while no message came,
// so that a pull request that iter skipped is sent (see pullRechecks).
func next(ctx context.Context, iter natsjs.MessagesContext) (natsjs.Msg, error) {
	for _, d := range pullRechecks {
		wctx, cancel := context.WithTimeout(ctx, d)
		m, err := iter.Next(natsjs.NextContext(wctx))
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			continue // only wctx's bound: nothing was taken from iter
		}
		return m, err
	}
	return iter.Next(natsjs.NextContext(ctx))
}

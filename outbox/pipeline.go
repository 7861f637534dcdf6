package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// secondConnWait is how long a pipelined worker holding a connection
// waits for its second one before it does without.
const secondConnWait = 20 * time.Millisecond

// claimed is a batch claimed in the open transaction of a connection.
type claimed struct {
	conn int // index into pipeline's connections
	seqs []int64
	msgs []Message
}

// pipeline is batches with the database's round trip hidden behind the
// broker's: on two connections, it marks batch k-1 and claims batch k+1
// while it publishes batch k. Each batch is still claimed, published and
// marked in a transaction of its own, which holds its Keys' heads.
//
// Batch k+1 is claimed before batch k is published, taking batch k's rows
// for published (claimAfter), so it may hold the rows behind them. It is
// handed to the Publisher only after Publish returned for batch k, and
// without the messages of any Key of batch k that was not published, or
// was held back itself: those stay pending, for a later claim, so a Key's
// message never goes to the Publisher before the Key's earlier ones are
// published. A message is in one batch being published at a time: batch
// k+1 leaves out batch k's rows, and holds none of batch k-1's, which were
// marked before it was claimed or are left out (held back in batch k-1,
// so their Key's head in batch k is locked).
func (r *Relay) pipeline(ctx context.Context, more func(n int) bool) (total int, err error) {
	var conns [2]*pgxpool.Conn
	var open [2]bool
	defer func() {
		for i, c := range conns {
			if c != nil {
				release(ctx, c, open[i])
			}
		}
	}()
	if conns[0], err = r.o.pool.Acquire(ctx); err != nil {
		return 0, fmt.Errorf("outbox: acquire: %w", err)
	}
	// Holding one connection while waiting for another deadlocks when
	// other pipelined workers on the pool (other Runs, other Relays) each
	// hold one: the second is waited for a moment only, then the batches
	// run one after the other on the first.
	actx, cancel := context.WithTimeout(ctx, secondConnWait)
	conns[1], err = r.o.pool.Acquire(actx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("outbox: acquire: %w", err)
		}
		c := conns[0]
		conns[0] = nil
		return r.batchesOn(ctx, c, more)
	}

	var b pgx.Batch
	r.queueClaim(&b, nil)
	open[0] = true
	cur := claimed{conn: 0}
	if cur.seqs, cur.msgs, err = claim(conns[0].SendBatch(ctx, &b), 0); err != nil {
		return 0, err
	}
	var last *outcome // batch k-1's, on the other connection
	var blocked map[string]bool
	for len(cur.msgs) > 0 {
		// Batch k: leave out the Keys held back in batch k-1.
		seqs, msgs := cur.seqs, cur.msgs
		held := map[string]bool{}
		if len(blocked) > 0 {
			seqs, msgs = nil, nil
			for i, m := range cur.msgs {
				if m.Key != "" && blocked[m.Key] {
					held[m.Key] = true
					continue
				}
				seqs, msgs = append(seqs, cur.seqs[i]), append(msgs, m)
			}
		}
		next := more(len(cur.msgs))

		// Meanwhile, on the other connection: batch k-1's marks and
		// COMMIT, then batch k+1's claim.
		other := 1 - cur.conn
		type claimResult struct {
			seqs []int64
			msgs []Message
			err  error
		}
		done := make(chan claimResult, 1)
		go func() {
			var b pgx.Batch
			marks := r.queueMarks(&b, last)
			if next {
				r.queueClaim(&b, append([]int64{}, seqs...))
				open[other] = true
			}
			if b.Len() == 0 {
				done <- claimResult{}
				return
			}
			var res claimResult
			if next {
				res.seqs, res.msgs, res.err = claim(conns[other].SendBatch(ctx, &b), marks)
			} else if res.err = conns[other].SendBatch(ctx, &b).Close(); res.err != nil {
				res.err = fmt.Errorf("outbox: mark: %w", res.err)
			} else {
				open[other] = false
			}
			done <- res
		}()

		var perr error
		if len(msgs) > 0 {
			pctx, cancel := context.WithTimeout(ctx, r.cfg.publishTimeout)
			perr = r.pub.Publish(pctx, msgs)
			cancel()
			total += len(msgs)
		}
		res := <-done // open[other] is the goroutine's no more
		if perr != nil && ctx.Err() != nil {
			// Shutting down is not the messages' fault: count no attempt.
			return total, ctx.Err()
		}
		last = r.outcome(seqs, perr)
		// The Keys held back for batch k+1: those not published in batch
		// k, and those held back in it.
		blocked = held
		for i, m := range msgs {
			if m.Key != "" && !published(last, i) {
				blocked[m.Key] = true
			}
		}
		if res.err != nil || !next {
			// Batch k's marks, on its own connection.
			var b pgx.Batch
			r.queueMarks(&b, last)
			if err := conns[cur.conn].SendBatch(ctx, &b).Close(); err != nil {
				return total, fmt.Errorf("outbox: mark: %w", err)
			}
			open[cur.conn] = false
			return total, res.err
		}
		cur = claimed{conn: other, seqs: res.seqs, msgs: res.msgs}
	}
	// The last claim came back empty: end its transaction, and mark the
	// batch before it.
	if _, err := conns[cur.conn].Exec(ctx, "COMMIT"); err != nil {
		return total, fmt.Errorf("outbox: claim: %w", err)
	}
	open[cur.conn] = false
	if last != nil {
		var b pgx.Batch
		r.queueMarks(&b, last)
		other := 1 - cur.conn
		if err := conns[other].SendBatch(ctx, &b).Close(); err != nil {
			return total, fmt.Errorf("outbox: mark: %w", err)
		}
		open[other] = false
	}
	return total, nil
}

// published reports whether the i-th message of the batch out sorted was
// published.
func published(out *outcome, i int) bool { return i < len(out.done) }

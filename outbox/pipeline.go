package outbox

import (
	"context"
	"fmt"
	"slices"
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
func (r *Relay) pipeline(ctx context.Context, refused *refusals, more func(n int) bool) (total int, err error) {
	p := &pipe{r: r, refused: refused}
	defer p.release(ctx)
	lone, err := p.acquire(ctx)
	if err != nil {
		return 0, err
	}
	if lone != nil {
		return r.batchesOn(ctx, lone, refused, more)
	}
	cur, err := p.claimFirst(ctx)
	if err != nil {
		return 0, err
	}
	var last *outcome // batch k-1's, on the other connection
	var blocked map[string]bool
	for len(cur.msgs) > 0 {
		seqs, msgs, held := holdBack(cur, blocked, refused.topics())
		next := more(len(cur.msgs))
		done := make(chan claimResult, 1)
		go p.settleAndClaimOn(ctx, done, 1-cur.conn, last, seqs, next)
		var perr error
		switch {
		case ctx.Err() != nil:
			perr = ctx.Err() // published nothing: the claim rolls back
		case len(msgs) > 0:
			perr = r.publish(ctx, seqs, msgs, func(out *outcome) {
				// The other connection is the goroutine's until it
				// answers; its panic, if any, goes no further.
				if res := <-done; res.ended != nil {
					logLost(r.cfg.logger, res.ended)
				}
				_ = p.settle(ctx, cur.conn, out)
			})
			total += len(msgs)
		}
		res := <-done // p.open[1-cur.conn] is the goroutine's no more
		if res.ended != nil {
			// The goroutine panicked: what Publish did is recorded
			// first, then the panic goes on up from here.
			out := r.outcome(seqs, perr)
			if perr != nil && ctx.Err() != nil {
				out = shutdownOutcome(seqs, perr)
			}
			if out != nil {
				_ = p.settle(ctx, cur.conn, out)
			}
			res.ended.raise()
		}
		if perr != nil && ctx.Err() != nil {
			// Shutting down is not the messages' fault: count no attempt,
			// but mark what the Publisher says it published.
			if out := shutdownOutcome(seqs, perr); out != nil {
				if err := p.settle(ctx, cur.conn, out); err != nil {
					return total, err
				}
			}
			return total, ctx.Err()
		}
		last = r.outcome(seqs, perr)
		goOn := refuse(refused, last, msgs)
		blocked = blockedAfter(held, msgs, last)
		if res.err != nil || !next {
			if err := p.settle(ctx, cur.conn, last); err != nil {
				return total, err
			}
			if res.err == nil {
				res.err = ctx.Err()
			}
			return total, res.err
		}
		if !goOn {
			// The next batch, claimed meanwhile, rolls back (release).
			if err := p.settle(ctx, cur.conn, last); err != nil {
				return total, err
			}
			return total, errStalled
		}
		cur = res.claimed
	}
	return total, p.finish(ctx, cur.conn, last)
}

// pipe is a pipeline's two connections and, for each, whether a
// transaction is open on it (for release).
type pipe struct {
	r       *Relay
	refused *refusals // the topics its claims leave out
	conns   [2]*pgxpool.Conn
	open    [2]bool
}

// claimResult is what settleAndClaim leaves: the next batch, if claimed,
// or the error; or, when it did not return, its panic (see
// settleAndClaimOn).
type claimResult struct {
	claimed
	err   error
	ended *carried
}

// acquire takes the pipeline's two connections; when the second is not
// to be had at once, it hands back the first, lone, for the batches to run
// one after the other on it.
func (p *pipe) acquire(ctx context.Context) (lone *pgxpool.Conn, err error) {
	if p.conns[0], err = p.r.o.pool.Acquire(ctx); err != nil {
		return nil, fmt.Errorf("outbox: acquire: %w", err)
	}
	// Holding one connection while waiting for another deadlocks when
	// other pipelined workers on the pool (other Runs, other Relays) each
	// hold one: the second is waited for a moment only.
	actx, cancel := context.WithTimeout(ctx, secondConnWait)
	p.conns[1], err = p.r.o.pool.Acquire(actx)
	cancel()
	if err == nil {
		return nil, nil
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("outbox: acquire: %w", err)
	}
	lone, p.conns[0] = p.conns[0], nil
	return lone, nil
}

// release gives the connections back to the pool.
func (p *pipe) release(ctx context.Context) {
	for i, c := range p.conns {
		if c != nil {
			release(ctx, c, p.open[i])
		}
	}
}

// claimFirst opens the first batch's transaction on connection 0 and
// claims the batch.
func (p *pipe) claimFirst(ctx context.Context) (claimed, error) {
	var b pgx.Batch
	p.r.queueClaim(&b, nil, p.refused.topics())
	p.open[0] = true
	cur := claimed{conn: 0}
	var err error
	cur.seqs, cur.msgs, err = claim(p.conns[0].SendBatch(ctx, &b), 0)
	return cur, err
}

// holdBack leaves out of cur the messages of the Keys in blocked (held
// back from the batch before) and those of the topics in skip (refused
// since cur was claimed, see refusals) with their Keys' later ones, and
// returns the rest, with the Keys it left out.
func holdBack(cur claimed, blocked map[string]bool, skip []string) (seqs []int64, msgs []Message, held map[string]bool) {
	held = map[string]bool{}
	if len(blocked) == 0 && len(skip) == 0 {
		return cur.seqs, cur.msgs, held
	}
	for i, m := range cur.msgs {
		if m.Key != "" && (blocked[m.Key] || held[m.Key]) || slices.Contains(skip, m.Topic) {
			if m.Key != "" {
				held[m.Key] = true
			}
			continue
		}
		seqs, msgs = append(seqs, cur.seqs[i]), append(msgs, m)
	}
	return seqs, msgs, held
}

// settleAndClaim runs on connection i, while batch k is published, in one
// round trip: batch k-1's marks and COMMIT (last, if any), then, if next,
// batch k+1's claim, taking batch k's rows (seqs) for published. It owns
// p.open[i] until it returns.
func (p *pipe) settleAndClaim(ctx context.Context, i int, last *outcome, seqs []int64, next bool) claimResult {
	var b pgx.Batch
	marks := p.r.queueMarks(&b, last)
	if next {
		p.r.queueClaim(&b, append([]int64{}, seqs...), p.refused.topics())
		p.open[i] = true
	}
	if b.Len() == 0 {
		return claimResult{}
	}
	res := claimResult{claimed: claimed{conn: i}}
	if next {
		res.seqs, res.msgs, res.err = claim(sendMarked(ctx, p.conns[i], &b, marks), marks)
	} else if res.err = sendMarked(ctx, p.conns[i], &b, marks).Close(); res.err != nil {
		res.err = fmt.Errorf("outbox: mark: %w", res.err)
	} else {
		p.open[i] = false
	}
	return res
}

// settleAndClaimOn is settleAndClaim on a goroutine of its own, which
// sends its result on done: also when it panics (the relay's logger, say)
// or calls runtime.Goexit, which the result carries (ended) for the
// pipeline's worker to raise on its goroutine, where Run recovers it.
func (p *pipe) settleAndClaimOn(ctx context.Context, done chan<- claimResult, i int, last *outcome, seqs []int64, next bool) {
	res := claimResult{}
	returned := false
	defer func() {
		if !returned {
			res = claimResult{ended: recovered(recover())}
		}
		done <- res
	}()
	res = p.settleAndClaim(ctx, i, last, seqs, next)
	returned = true
}

// blockedAfter adds to held, the Keys held back from batch k, those batch
// k did not publish: the Keys to hold back from batch k+1.
func blockedAfter(held map[string]bool, msgs []Message, out *outcome) map[string]bool {
	for i, m := range msgs {
		if m.Key != "" && !published(out, i) {
			held[m.Key] = true
		}
	}
	return held
}

// settle writes out's marks and COMMIT on connection i.
func (p *pipe) settle(ctx context.Context, i int, out *outcome) error {
	var b pgx.Batch
	marks := p.r.queueMarks(&b, out)
	if err := sendMarked(ctx, p.conns[i], &b, marks).Close(); err != nil {
		return fmt.Errorf("outbox: mark: %w", err)
	}
	p.open[i] = false
	return nil
}

// finish ends the transaction of the last claim, on connection i, which
// came back empty, then settles the batch before it (last, if any) on the
// other.
func (p *pipe) finish(ctx context.Context, i int, last *outcome) error {
	if last != nil {
		// First, so that a relay shutting down still records it.
		if err := p.settle(ctx, 1-i, last); err != nil {
			return err
		}
	}
	if _, err := p.conns[i].Exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("outbox: claim: %w", err)
	}
	p.open[i] = false
	return nil
}

// published reports whether the i-th message of the batch out sorted was
// published.
func published(out *outcome, i int) bool { return i < len(out.done) }

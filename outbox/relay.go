package outbox

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Publisher hands a batch of messages to a broker. Publish returns nil only
// when every message is accepted (acknowledged by the broker). An error
// means none of them may be counted as published, unless it is, or wraps,
// a *PublishError saying which were. Publish may be called again with
// messages it already published (after a crash or a lost acknowledgement):
// the broker, or the consumer's Inbox, deduplicates by Message.ID. A Relay
// calls it from as many goroutines at once as it has workers
// (WithWorkers).
//
// A Publish that panics (or calls runtime.Goexit) fails its whole batch
// as an error would: each message counts a failed attempt (none is
// counted published, though some may have reached the broker), its retry
// put off with backoff, the panic's value kept as the messages' last
// error (see Failed), and the panic logged at level Error with its stack;
// then the panic goes on up (see RunOnce and Run). Counting the attempt
// keeps a message that the Publisher panics on every time from being
// handed to it again at once by every relay restarted after the panic:
// after WithMaxAttempts it is failed, and its Key's next messages go on.
type Publisher interface {
	Publish(ctx context.Context, msgs []Message) error
}

// PublishError is a Publisher's partial failure: msgs[:Index] were
// published, msgs[Index] failed with Err, and what came after is unknown
// (left pending, its attempts not counted). It is a plain value; Error
// and Unwrap only read it, so it is safe for concurrent use as long as
// nobody changes its fields.
type PublishError struct {
	Index int
	Err   error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("outbox: publish message %d: %v", e.Index, e.Err)
}

func (e *PublishError) Unwrap() error { return e.Err }

// ErrUnpublishable is what a Publisher wraps in a *PublishError's Err for
// a message it can never publish as it is (for the jetstream Publisher: a
// header its broker would change or refuses, a message over the broker's
// size limit, a subject it cannot take), rather than one that
// failed for now: the relay marks that message failed at once, its
// attempt counted, instead of retrying it with backoff up to
// WithMaxAttempts (for ever under a limit that never gives up), so that
// its Key's next messages are published. The message is kept: Failed
// lists it with the error, Redrive puts it back (to fail again unless the
// Publisher changed). Outside a *PublishError it is an ordinary failure
// of the batch. Match it with errors.Is.
var ErrUnpublishable = errors.New("outbox: the Publisher cannot publish the message as it is")

// Relay publishes an Outbox's committed messages. Create it with
// (*Outbox).Relay and call Run; the zero value is not usable. Run one per
// instance, as many as you like: relays share the work row by row, never
// hold the same message at once, and never hand a Key's message to their
// Publisher before the Key's earlier ones are published or failed. A Relay
// is safe for concurrent use: RunOnce may be called from several
// goroutines and Run more than once, each behaving as another relay.
type Relay struct {
	o          *Outbox
	pub        Publisher
	cfg        relayConfig
	claim      string // SQL
	claimAfter string // SQL: the claim of a pipelined relay's next batch
	// claimSkip and claimAfterSkip are claim and claimAfter leaving out
	// the topics of a refusals.
	claimSkip, claimAfterSkip string
	pipelined                 bool // whether the workers run pipeline
}

// Relay returns a Relay publishing o's messages through pub.
func (o *Outbox) Relay(pub Publisher, opts ...RelayOption) *Relay {
	cfg := defaultRelayConfig()
	for _, opt := range opts {
		opt(&cfg)
	}
	cfg.normalise()
	window := 4*int64(cfg.batchSize) + 64 // int64: no wrap on 32-bit platforms either
	return &Relay{
		o: o, pub: pub, cfg: cfg,
		claim:          o.names.claimSQL(cfg.batchSize, window, false, false),
		claimAfter:     o.names.claimSQL(cfg.batchSize, window, true, false),
		claimSkip:      o.names.claimSQL(cfg.batchSize, window, false, true),
		claimAfterSkip: o.names.claimSQL(cfg.batchSize, window, true, true),
		// Two connections per worker, so that no worker waits for a
		// connection another worker holds while it holds one.
		pipelined: int(o.pool.Config().MaxConns) >= 2*cfg.workers,
	}
}

// Run publishes until ctx is done, then returns nil. It publishes at once
// what is pending, then whenever an Enqueue commits (LISTEN/NOTIFY, on a
// connection of its own, reopened when lost), and every PollInterval in any
// case. A batch is claimed, published and marked in one transaction that
// holds its rows' locks, so a relay that dies before marking leaves them
// pending for the next one: they are published again (at least once, never
// lost). A failed Publish puts its messages off with exponential backoff
// and counts an attempt for each; past MaxAttempts a message is failed
// (see Failed and Redrive). Database errors are logged and retried with
// backoff. Published rows are deleted after the Retention period.
//
// When ctx ends, no batch is handed to the Publisher any more; a batch it
// holds is marked with what Publish returns (a failure then counts no
// attempt, but the messages a *PublishError says were published are
// marked), so that a clean shutdown does not publish them again. The
// statements that mark batches or end transactions may run for up to 5
// seconds after ctx ended; Run returns once they are done and the
// Publisher has returned.
//
// While batches come full, a worker pipelines them when the pool has two
// connections per worker (WithWorkers): it claims batch k+1, taking the
// rows behind batch k's, and marks batch k-1, in one round trip that runs
// while batch k is published; batch k+1 goes to the Publisher after batch
// k is published, without the Keys batch k did not publish. Otherwise a
// batch's marks and the next claim share one round trip.
//
// Run calls the Publisher, and the relay's logger, on goroutines of its
// own, where a panic would end the process whatever its caller did. A
// panic there (or a call of runtime.Goexit) stops the relay instead, as
// if ctx had ended: the panicking batch is recorded as failed (see
// Publisher), the other workers' batches as at any stop, every connection
// goes back to the pool, all within the settle timeout counted from the
// Publisher's panic (WithSettleTimeout); then Run panics, on its caller's
// goroutine, with a *PanicError holding the first panic's value and the
// stack where it happened (a later panic of another goroutine is logged
// at level Error), or calls runtime.Goexit. This is the rule of RunOnce,
// Inbox.Process and outbox/jetstream's Consume: a panic goes up to the
// caller, with nothing left held. Run does not log a panic and go on: a Publisher that
// panicked may have left itself broken (a lock held, a half-updated
// state), and a bug that panics on every batch would be logged for ever
// while nothing is published. A caller that wants the relay to go on
// recovers the panic and calls Run again (a supervisor); the batch that
// panicked is then tried again after its backoff, until WithMaxAttempts.
func (r *Relay) Run(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	guard := &runGuard{stop: stop, logger: r.cfg.logger}
	ctx, cancel := r.withSettling(ctx)
	defer cancel()
	wakes := make([]chan struct{}, r.cfg.workers)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	refused := newRefusals(r.cfg.pollInterval)
	var wg sync.WaitGroup
	if r.cfg.listen {
		wg.Add(1)
		go func() { defer wg.Done(); guard.run(func() { r.listen(ctx, wakes) }) }()
	}
	for i, wake := range wakes {
		wg.Add(1)
		go func() { defer wg.Done(); guard.run(func() { r.work(ctx, wake, wakes, refused, i == 0) }) }()
	}
	wg.Wait()
	guard.raise()
	return nil
}

// work is one of Run's workers: batch after batch while batches come full
// (waking the others, since there is more), then a wait for a wake-up or
// the poll interval; the first worker also cleans up, between runs of
// batches. The workers share refused.
func (r *Relay) work(ctx context.Context, wake <-chan struct{}, all []chan struct{}, refused *refusals, cleans bool) {
	var lastCleanup time.Time
	errWait := r.cfg.backoffMin
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		if cleans && r.cfg.retention > 0 && time.Since(lastCleanup) >= r.cfg.cleanupEvery {
			lastCleanup = time.Now()
			if _, err := r.o.DeletePublished(ctx, r.cfg.retention, r.cfg.cleanupBatch); err != nil && ctx.Err() == nil {
				r.cfg.logger.Warn("outbox: cleanup failed", "table", r.o.names.table, "err", err)
			}
		}
		// Full batches mean more may be waiting: wake the other workers
		// and go on, on the same connection, unless the cleanup is due.
		full := false
		run := r.batches
		if r.pipelined {
			run = r.pipeline
		}
		_, err := run(ctx, refused, func(n int) bool {
			full = n == r.cfg.batchSize
			if full {
				wakeAll(all)
			}
			return full && ctx.Err() == nil &&
				!(cleans && r.cfg.retention > 0 && time.Since(lastCleanup) >= r.cfg.cleanupEvery)
		})
		wait := r.cfg.pollInterval
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errStalled):
			// Logged with the batch's marks (queueMarks). The wake-up
			// this worker gave itself when the batch came full is
			// dropped: the poll interval, or a new message, starts the
			// next batch.
			errWait = r.cfg.backoffMin
			select {
			case <-wake:
			default:
			}
		case err != nil:
			r.cfg.logger.Warn("outbox: relay batch failed", "table", r.o.names.table, "err", err, "retry_in", errWait)
			wait = errWait
			errWait = min(2*errWait, r.cfg.backoffMax)
		case full:
			errWait = r.cfg.backoffMin
			continue // more may be waiting
		default:
			errWait = r.cfg.backoffMin
		}
		timer.Reset(wait) // no stale tick is delivered after Reset (Go 1.23)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-timer.C:
		}
	}
}

// RunOnce claims, publishes and marks one batch and returns how many
// messages it handed to the Publisher (whether they were published or not).
// A Publisher error is no error of RunOnce's: it is recorded on the rows.
// Run calls it in a loop; tests and tools may call it directly.
//
// RunOnce calls the Publisher on the caller's goroutine: a panic of
// Publish goes up through RunOnce as it is, its value and stack
// unchanged, once the batch is recorded as failed (see Publisher) and its
// connection is back in the pool, within the settle timeout counted from
// the panic, as from the end of ctx (WithSettleTimeout); a panic
// elsewhere (the relay's logger, say) leaves the batch as a crash would,
// its transaction rolled back.
//
// The batch costs two round trips to the database: BEGIN and the claim in
// one pipeline, the marks and COMMIT in another.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	ctx, cancel := r.withSettling(ctx)
	defer cancel()
	return r.batches(ctx, nil, func(int) bool { return false })
}

// outcome is what a published batch leaves to write: the rows to mark
// published and those whose attempt failed, with the error.
type outcome struct {
	done, failed  []int64
	perr          error
	unpublishable bool // failed wraps ErrUnpublishable: failed at once
}

// stalled reports whether o's batch failed for now before any of its
// messages was published: the broker refuses what it is given (a full
// stream, no stream for the subject, the broker down), and most likely
// the rest of the backlog of the failed message's topic too, if not all
// of it. Only the failed message is put off; the batch's others, pending
// still, would be claimed and handed to the Publisher again at once,
// batch after batch. When the Publisher named the failed message (a
// *PublishError: its first), the run leaves its topic out for a poll
// interval (see refusals) and goes on with the other topics' messages;
// when it failed the whole batch, the relay stops there (errStalled) and
// waits for the poll interval.
func (o *outcome) stalled() bool {
	return o != nil && len(o.done) == 0 && len(o.failed) > 0 && !o.unpublishable
}

// refuse records in refused, when out is a stalled batch (see
// outcome.stalled) of msgs whose first message the Publisher named as
// failed, that message's topic, and reports whether the run of batches
// may go on: false when out is stalled otherwise (the whole batch
// failed). A nil refused (RunOnce: one batch) records nothing.
func refuse(refused *refusals, out *outcome, msgs []Message) bool {
	if refused == nil || !out.stalled() {
		return true
	}
	var pe *PublishError
	if !errors.As(out.perr, &pe) || pe.Index != 0 {
		// Not a message of the batch (see outcome): the whole batch
		// failed.
		return false
	}
	refused.add(msgs[0].Topic)
	return true
}

// errStalled ends a run of batches after a stalled one that failed as a
// whole (see outcome.stalled); it is no error of Run's.
var errStalled = errors.New("outbox: a batch failed before any of it was published")

// batches claims, publishes and marks batches on one connection for as
// long as more, asked after each publication with the batch's size, says
// so, and returns how many messages it handed to the Publisher. Each batch
// is claimed, published and marked in a transaction of its own, as in
// RunOnce; but a batch's marks, its COMMIT, the next BEGIN and the next
// claim go to the database in one pipeline, so that a run of batches costs
// one round trip per batch, not two. Nothing changes for the rows: the
// next claim runs after the commit, as it would in a RunOnce of its own.
// Its claims leave out the topics in refused, and add to it (see
// outcome.stalled).
func (r *Relay) batches(ctx context.Context, refused *refusals, more func(n int) bool) (int, error) {
	conn, err := r.o.pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: acquire: %w", err)
	}
	return r.batchesOn(ctx, conn, refused, more)
}

// batchesOn is batches on conn, which it releases.
func (r *Relay) batchesOn(ctx context.Context, conn *pgxpool.Conn, refused *refusals, more func(n int) bool) (int, error) {
	open, stalled := false, false
	defer func() { release(ctx, conn, open) }()
	total := 0
	var last *outcome // published, not marked yet
	for {
		var b pgx.Batch
		marks := r.queueMarks(&b, last)
		r.queueClaim(&b, nil, refused.topics())
		open = true
		seqs, msgs, err := claim(sendMarked(ctx, conn, &b, marks), marks)
		if err != nil {
			return total, err
		}
		last = nil
		if len(msgs) == 0 {
			open = false
			if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
				return total, fmt.Errorf("outbox: claim: %w", err)
			}
			return total, nil
		}
		if ctx.Err() != nil {
			return total, ctx.Err() // the claim rolls back
		}
		perr := r.publish(ctx, seqs, msgs, func(out *outcome) {
			var b pgx.Batch
			if sendMarked(ctx, conn, &b, r.queueMarks(&b, out)).Close() == nil {
				open = false
			}
		})
		total += len(msgs)
		if perr != nil && ctx.Err() != nil {
			// Shutting down is not the messages' fault: count no attempt,
			// but mark what the Publisher says it published.
			last = shutdownOutcome(seqs, perr)
			if last == nil {
				return total, ctx.Err()
			}
			break
		}
		last = r.outcome(seqs, perr)
		goOn := refuse(refused, last, msgs)
		if !more(len(msgs)) {
			break
		}
		if !goOn {
			stalled = true
			break
		}
	}
	var b pgx.Batch
	marks := r.queueMarks(&b, last)
	if err := sendMarked(ctx, conn, &b, marks).Close(); err != nil {
		return total, fmt.Errorf("outbox: mark: %w", err)
	}
	open = false
	if stalled && ctx.Err() == nil {
		return total, errStalled
	}
	return total, ctx.Err()
}

// defaultSettleTimeout is how long, after Run's context ended, the
// statements that record a published batch, or end a transaction, may
// still run, unless WithSettleTimeout says otherwise.
const defaultSettleTimeout = 5 * time.Second

// settleKey is the context key under which Run and RunOnce pass their
// settleScope to what they call.
type settleKey struct{}

// settleScope is what Run and RunOnce pass under settleKey: their settle
// context (see settling), and stop, which ends their own context, so that
// a panic of the Publisher ends the call as its context's end would, the
// settle timeout counted from then on (see publish).
type settleScope struct {
	settle context.Context
	stop   context.CancelFunc
}

// settleContext returns a context that carries ctx's values, not its
// cancellation, and ends d after ctx does (or when cancel is called).
func settleContext(ctx context.Context, d time.Duration) (sctx context.Context, cancel context.CancelFunc) {
	sctx, end := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(d, end) })
	return sctx, func() { stop(); end() }
}

// settling returns the context of statements that record what a batch the
// Publisher took did, or that end a transaction: they must reach the
// database also when ctx ends (a relay shutting down), or the batch's
// messages would be published again, and must not wait for ever on a
// database that stopped answering. Under Run and RunOnce, it ends the
// relay's settle timeout (WithSettleTimeout) after their context ended,
// one bound for every such statement of the call; a ctx that carries no
// settle context (none does today) gets the default bound of its own.
func settling(ctx context.Context) (context.Context, context.CancelFunc) {
	if s, ok := ctx.Value(settleKey{}).(settleScope); ok {
		return context.WithCancel(s.settle)
	}
	return settleContext(ctx, defaultSettleTimeout)
}

// withSettling returns a context ending with ctx, or with stopCall, that
// carries the settle context settling hands out under it; and the
// function that ends both, for Run and RunOnce to call when they return.
func (r *Relay) withSettling(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := context.WithCancel(ctx)
	settle, cancel := settleContext(ctx, r.cfg.settleTimeout)
	return context.WithValue(ctx, settleKey{}, settleScope{settle, stop}), func() { cancel(); stop() }
}

// stopCall ends the context of the Run or RunOnce that ctx is under, if
// any: the call is ending (its Publisher panicked), and what it still
// writes is bounded by the settle timeout from now on, as after its
// caller's context ended.
func stopCall(ctx context.Context) {
	if s, ok := ctx.Value(settleKey{}).(settleScope); ok {
		s.stop()
	}
}

// sendMarked sends b on conn; its first marks statements record a
// published batch (see queueMarks), so with marks it goes under settling's
// context.
func sendMarked(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, marks int) pgx.BatchResults {
	if marks == 0 {
		return conn.SendBatch(ctx, b)
	}
	sctx, cancel := settling(ctx)
	return cancelling{conn.SendBatch(sctx, b), cancel}
}

// cancelling is a batch's results that end their context when closed.
type cancelling struct {
	pgx.BatchResults
	cancel context.CancelFunc
}

func (c cancelling) Close() error {
	defer c.cancel()
	return c.BatchResults.Close()
}

// shutdownOutcome is what is left to mark of a batch whose Publish failed
// because Run's context is done: the messages the Publisher says it
// published, if any (nil if none). The others stay pending, their attempts
// not counted.
func shutdownOutcome(seqs []int64, perr error) *outcome {
	var pe *PublishError
	if errors.As(perr, &pe) && pe.Index > 0 && pe.Index < len(seqs) { // as outcome reads one
		return &outcome{done: seqs[:pe.Index]}
	}
	return nil
}

// queueClaim queues BEGIN and the claim of a batch; with published
// non-nil, the claim takes those rows for published (see pipeline); with
// skip, it leaves those topics out (see refusals).
func (r *Relay) queueClaim(b *pgx.Batch, published []int64, skip []string) {
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	// The claim must walk the pending rows in sequence order and stop at
	// the window's end; on a table whose statistics lag behind (a burst of
	// enqueues before autovacuum's ANALYZE) the planner would rather read
	// every pending row into a bitmap and sort them, once per batch.
	b.Queue(`SET LOCAL enable_bitmapscan = off`)
	b.Queue(`SET LOCAL enable_seqscan = off`)
	switch {
	case published != nil && skip != nil:
		b.Queue(r.claimAfterSkip, published, skip)
	case published != nil:
		b.Queue(r.claimAfter, published)
	case skip != nil:
		b.Queue(r.claimSkip, skip)
	default:
		b.Queue(r.claim)
	}
}

// release gives conn back to the pool. If open, its transaction is open or
// failed: release ends it, or drops the connection rather than give the
// pool one inside a transaction.
func release(ctx context.Context, conn *pgxpool.Conn, open bool) {
	if open {
		sctx, cancel := settling(ctx)
		defer cancel()
		if _, err := conn.Exec(sctx, "ROLLBACK"); err != nil {
			_ = conn.Hijack().Close(sctx)
			return
		}
	}
	conn.Release()
}

// publish hands msgs, the rows seqs, to the Publisher, within the publish
// timeout. When Publish does not return (it panics, or calls
// runtime.Goexit), publish ends the context of the Run or RunOnce it is
// under (stopCall), and abandon gets the batch's outcome, each message's
// attempt failed (see Publisher), to write, under the settle timeout,
// before the panic goes on up with its value, from within Publish's
// stack.
func (r *Relay) publish(ctx context.Context, seqs []int64, msgs []Message, abandon func(*outcome)) error {
	pctx, cancel := context.WithTimeout(ctx, r.cfg.publishTimeout)
	defer cancel()
	returned := false
	defer func() {
		if returned {
			return
		}
		v := recover() // nil: runtime.Goexit, which goes on by itself
		// The call ends with the panic: its marks must not wait for ever
		// on a database that stopped answering, nor its other workers go
		// on meanwhile.
		stopCall(ctx)
		abandon(&outcome{failed: seqs, perr: &publishPanic{value: v, stack: debug.Stack()}})
		if v != nil {
			panic(v)
		}
	}()
	err := r.pub.Publish(pctx, msgs)
	returned = true
	return err
}

// outcome sorts a batch's rows by what Publish returned.
func (r *Relay) outcome(seqs []int64, perr error) *outcome {
	var pe *PublishError
	switch {
	case perr == nil:
		return &outcome{done: seqs}
	case errors.As(perr, &pe) && pe.Index >= 0 && pe.Index < len(seqs):
		return &outcome{done: seqs[:pe.Index], failed: seqs[pe.Index : pe.Index+1], perr: perr,
			unpublishable: errors.Is(pe.Err, ErrUnpublishable)}
	default:
		return &outcome{failed: seqs, perr: perr}
	}
}

// queueMarks queues out's marks and the COMMIT of its transaction, and
// returns how many statements it queued (none when out is nil).
func (r *Relay) queueMarks(b *pgx.Batch, out *outcome) int {
	if out == nil {
		return 0
	}
	// Losing this commit to a crash only means publishing the batch again,
	// which the Publisher's contract allows: no need to wait for the disk.
	b.Queue(`SET LOCAL synchronous_commit = off`)
	if len(out.done) > 0 {
		b.Queue(r.o.names.publishedSQL, out.done)
	}
	if len(out.failed) > 0 {
		limit := r.cfg.maxAttempts
		var pp *publishPanic
		switch {
		case errors.As(out.perr, &pp):
			r.cfg.logger.Error("outbox: the Publisher panicked; its messages count a failed attempt", "table", r.o.names.table,
				"messages", len(out.failed), "err", out.perr, "stack", string(pp.stack))
		case out.unpublishable:
			limit = 1 // this attempt fails it
			r.cfg.logger.Error("outbox: message cannot be published; marked failed", "table", r.o.names.table, "err", out.perr)
		default:
			r.cfg.logger.Warn("outbox: publish failed", "table", r.o.names.table, "messages", len(out.failed), "err", out.perr)
		}
		b.Queue(r.o.names.failSQL, out.failed, storableError(out.perr),
			r.cfg.backoffMin.Seconds(), r.cfg.backoffMax.Seconds(), limit)
	}
	b.Queue(`COMMIT`)
	return b.Len()
}

// claim reads the results of marks statements queued by queueMarks, then
// the claimed rows from BEGIN, the SETs and the claim.
func claim(br pgx.BatchResults, marks int) (seqs []int64, msgs []Message, err error) {
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("outbox: claim: %w", cerr)
		}
	}()
	for range marks {
		if _, err := br.Exec(); err != nil {
			return nil, nil, fmt.Errorf("outbox: mark: %w", err)
		}
	}
	for range 3 { // BEGIN and the SETs
		if _, err := br.Exec(); err != nil {
			return nil, nil, fmt.Errorf("outbox: claim: %w", err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("outbox: claim: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var m Message
		var attempts int
		if err := rows.Scan(&seq, &m.ID, &m.Topic, &m.Key, &m.Payload, &m.Headers, &attempts); err != nil {
			return nil, nil, fmt.Errorf("outbox: claim: %w", err)
		}
		seqs = append(seqs, seq)
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("outbox: claim: %w", err)
	}
	return seqs, msgs, nil
}

// wakeAll wakes every worker that waits, and leaves a wake-up for those
// that do not.
func wakeAll(wakes []chan struct{}) {
	for _, wake := range wakes {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// listen turns the Outbox's notifications into wake-ups until ctx is done,
// on a connection of its own (a pooled one would go back to the pool still
// listening). After each (re)connection it wakes the relay once, for what
// was committed while it was not listening.
func (r *Relay) listen(ctx context.Context, wakes []chan struct{}) {
	signal := func() { wakeAll(wakes) }
	wait := r.cfg.backoffMin
	for ctx.Err() == nil {
		err := r.listenOnce(ctx, signal)
		if ctx.Err() != nil {
			return
		}
		r.cfg.logger.Warn("outbox: listen connection lost; polling until it is back", "table", r.o.names.table, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		wait = min(2*wait, r.cfg.backoffMax)
	}
}

func (r *Relay) listenOnce(ctx context.Context, signal func()) error {
	conn, err := pgx.ConnectConfig(ctx, r.o.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN "`+r.o.names.channel+`"`); err != nil {
		return err
	}
	signal()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		signal()
	}
}

// maxErrorText bounds the failure text kept in a row's last_error.
const maxErrorText = 4096

// storableError is err's text as a text column can hold it: PostgreSQL
// refuses a NUL byte or invalid UTF-8 in text, and a failure mark it
// refused would roll back the whole mark transaction, so that the
// messages published before the failure would be published again and the
// failed one's attempt never counted (WithMaxAttempts would never apply).
// A Publisher's error may quote anything (a response body, a binary
// reply), so such bytes become U+FFFD and the text is cut at maxErrorText
// bytes, on a rune boundary.
func storableError(err error) string {
	s := strings.ToValidUTF8(err.Error(), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) > maxErrorText {
		cut := maxErrorText
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

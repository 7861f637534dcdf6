package pgstore

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// txLock is the lock of a Tx's connection: each statement of the handler
// holds it (handlerTx.lock), rows and batch results until they are closed,
// and the Tx's Commit and Rollback, so that the request's transaction ends
// after whatever a goroutine of the handler still runs or reads on it. It
// is not reentrant: while its holder lets other code run with it held
// (open rows, a CopyFrom's source), it is marked busy, and a statement
// asking for it then is refused with that error instead of waiting, as
// pgx refuses a statement on a busy connection ("conn busy"); its holder
// may be the goroutine that asks. Once the request's end (lockEnd) asks
// for it, it goes to that end next: every statement asking for it, or
// waiting for it, is refused with pgx.ErrTxClosed (unless the lock is
// busy: then with that error, as before), and only the holder is waited
// for. Waits end with their context. Its zero value is unlocked; it is
// safe for concurrent use.
type txLock struct {
	mu   sync.Mutex
	held bool
	// busy, while held: what a statement asking for the lock gets instead
	// of waiting (errRowsOpen, errCopyBusy), nil while a statement runs.
	busy error
	// ending: the request's Commit or Rollback asked for the lock (it is
	// never unset; the request is over then).
	ending bool
	// changed, made by a waiter, is closed when held, busy or ending
	// changes.
	changed chan struct{}
}

// lock is a statement's: it waits until the lock is free and takes it, or
// returns the busy error at once when the holder marked it busy, or
// pgx.ErrTxClosed once the request's end asked for it (lockEnd), or the
// cause of ctx's end.
func (l *txLock) lock(ctx context.Context) error {
	return l.acquire(ctx, false, true)
}

// lockEnd is the request's Commit's or Rollback's: from then on the lock
// refuses every statement (see lock), whether it asks later or waits
// already, and lockEnd waits until the holder lets it go and takes it,
// or returns the busy error at once when refuseBusy and the holder marked
// it busy, or the cause of ctx's end.
func (l *txLock) lockEnd(ctx context.Context, refuseBusy bool) error {
	l.mu.Lock()
	if !l.ending {
		l.ending = true
		l.signal()
	}
	l.mu.Unlock()
	return l.acquire(ctx, true, refuseBusy)
}

// acquire takes the lock for the request's end (end) or a statement.
func (l *txLock) acquire(ctx context.Context, end, refuseBusy bool) error {
	for {
		l.mu.Lock()
		if refuseBusy && l.held && l.busy != nil {
			err := l.busy
			l.mu.Unlock()
			return err
		}
		if l.ending && !end {
			l.mu.Unlock()
			return pgx.ErrTxClosed
		}
		if !l.held {
			l.held = true
			l.mu.Unlock()
			return nil
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// setBusy marks the held lock busy with err, or no longer busy (nil).
func (l *txLock) setBusy(err error) {
	l.mu.Lock()
	l.busy = err
	l.signal()
	l.mu.Unlock()
}

// unlock lets the lock go.
func (l *txLock) unlock() {
	l.mu.Lock()
	l.held, l.busy = false, nil
	l.signal()
	l.mu.Unlock()
}

func (l *txLock) signal() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

package mockcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
)

// DefaultStoreWait is how long the command waits by default for a store
// that cannot be reached at start (-store-wait). It is long enough for a
// PostgreSQL or Redis started beside it (docker-compose, a CI service, a
// restart) to come up, a PostgreSQL container's first start with its
// initdb included, and short enough that a wrong address still fails
// within half a minute, with a line on stderr per attempt meanwhile.
const DefaultStoreWait = 30 * time.Second

// The pauses between attempts to reach the store: the first, doubled after
// each attempt up to the last.
const (
	firstStoreRetry = 100 * time.Millisecond
	maxStoreRetry   = time.Second
)

// waitForStore calls attempt until it returns nil, an error that waiting
// cannot cure (see transient), or wait has passed since the first call;
// then it returns attempt's last error. Each call gets connectTimeout, or
// what is left of the wait when that is shorter, but at least
// minStoreAttempt (see attemptTimeout), so that a store that accepts
// connections and does not answer fails the start within the wait and
// that second, not connectTimeout past it.
// After each failure it retries it prints one line to w: the error and
// the pause before the next attempt, which starts at firstStoreRetry and
// doubles up to maxStoreRetry; the last attempt comes when wait ends. A
// wait of 0 makes one attempt. It returns the last error too when ctx ends
// during a pause.
func waitForStore(ctx context.Context, wait time.Duration, w io.Writer, attempt func(context.Context) error) error {
	deadline := time.Now().Add(wait)
	pause := firstStoreRetry
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout(wait, time.Until(deadline)))
		err := attempt(actx)
		cancel()
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			if wait > 0 {
				err = fmt.Errorf("%w (gave up after -store-wait %v)", err, wait)
			}
			return err
		}
		d := min(pause, left)
		fmt.Fprintf(w, "%s; retrying in %v (-store-wait %v, %v left)\n",
			oneLine(err), d.Round(time.Millisecond), wait, left.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		pause = min(2*pause, maxStoreRetry)
	}
}

// minStoreAttempt is the least time an attempt gets while the store is
// waited for: enough for a dial and a first answer on a network that
// works.
const minStoreAttempt = time.Second

// attemptTimeout is how long an attempt to reach the store may take, with
// left of the wait to go: connectTimeout without a wait (one attempt), else
// left, between minStoreAttempt and connectTimeout.
func attemptTimeout(wait, left time.Duration) time.Duration {
	if wait == 0 {
		return connectTimeout
	}
	return min(max(left, minStoreAttempt), connectTimeout)
}

// transient reports whether err says that the store is not reachable yet
// rather than that it refuses the command's settings: a dial, read or
// write that failed (refused, reset, cut, timed out, a host name not
// resolved yet, as a container's is until it runs), an attempt that ran
// out of time, PostgreSQL's connection exceptions (class 08), shutdown and
// start-up (57P01 to 57P03) and too many connections (53300), and Redis
// loading its data set or at its client limit. Anything else, among it an
// authentication failure, a database that does not exist or a server
// certificate that fails verification, is not transient.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch c := pgErr.Code; {
		case strings.HasPrefix(c, "08"), c == "57P01", c == "57P02", c == "57P03", c == "53300":
			return true
		}
		return false
	}
	var op *net.OpError
	var dns *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &op), errors.As(err, &dns),
		errors.As(err, &ne) && ne.Timeout(),
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, pgconn.ErrConnClosed):
		return true
	}
	return redis.IsLoadingError(err) || redis.IsMaxClientsError(err)
}

// oneLine joins the lines of a message, as pgconn's errors for several
// hosts have, so that each attempt takes one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

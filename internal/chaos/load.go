package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/saferetry/saferetry"
)

// op is one logical operation: a payment with an Idempotency-Key of its
// own, sent once, sometimes with a concurrent duplicate, and retried by the
// saferetry client.
type op struct {
	key  string
	body []byte
	// amount, currency and recipient are what body asks for, which every
	// payment under key must hold.
	amount    int64
	currency  string
	recipient string

	mu  sync.Mutex
	ids map[string]bool // payment IDs the client was answered with
	// answers are those IDs in the order the answers came (the replay
	// after the cell's last), each one that differs from the one before:
	// an ID that comes back after another is in it twice.
	answers  []string
	final    int // a final client-error status, if one came
	resolved bool
	lastErr  string
}

// outcome records the answer of one send of o.
func (o *op) outcome(id string, status int, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case id != "":
		if o.ids == nil {
			o.ids = map[string]bool{}
		}
		o.ids[id] = true
		if n := len(o.answers); n == 0 || o.answers[n-1] != id {
			o.answers = append(o.answers, id)
		}
		o.resolved = true
	case status == http.StatusPaymentRequired || status == http.StatusBadRequest:
		o.final, o.resolved = status, true
	case err != nil:
		o.lastErr = err.Error()
	}
}

func (o *op) isResolved() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.resolved
}

// roundRobin sends each attempt to the next instance, as a load balancer
// would: the retries of one operation land on different instances.
type roundRobin struct {
	addrs []string
	next  atomic.Uint64
	base  http.RoundTripper
}

func (rr *roundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Host = rr.addrs[rr.next.Add(1)%uint64(len(rr.addrs))]
	r.Host = ""
	return rr.base.RoundTrip(r)
}

// loader sends the operations of one run through the saferetry client.
type loader struct {
	client   *saferetry.Client
	base     *http.Transport
	opTime   time.Duration // bound of one send, retries included
	progress func(string, ...any)
}

// progressEvery paces the progress lines of a long run.
const progressEvery = 30 * time.Second

func newLoader(addrs []string, lease time.Duration) *loader {
	base := &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
	}
	// Options, not fields set afterwards: the schedule a fresh
	// operation starts from is the one built here.
	newBackoff := func() backoff.BackOff {
		return backoff.NewExponentialBackOff(backoff.WithInitialInterval(25*time.Millisecond),
			backoff.WithMaxInterval(400*time.Millisecond), backoff.WithMaxElapsedTime(0))
	}
	client := saferetry.NewClient(
		saferetry.WithBase(&roundRobin{addrs: addrs, base: base}),
		saferetry.WithMaxAttempts(10),
		saferetry.WithBackoff(newBackoff),
		saferetry.WithMaxRetryAfter(lease/4),
		// A paused instance holds its connections without answering: give
		// up on it after a lease, before its pause (pauseFor) ends, and
		// retry elsewhere, where the claim it holds is taken over once its
		// lease lapsed. A client that waited out the pause would be answered
		// by the paused instance itself, and the pause would never lead to
		// a takeover.
		saferetry.WithAttemptTimeout(lease),
		saferetry.WithRetryBudget(0, 0), // retries are the point here
	)
	return &loader{client: client, base: base, opTime: 30 * time.Second}
}

// send sends o once (with the client's retries) and records the outcome.
func (l *loader) send(ctx context.Context, o *op) {
	ctx, cancel := context.WithTimeout(ctx, l.opTime)
	defer cancel()
	req, err := http.NewRequestWithContext(saferetry.WithKey(ctx, o.key), http.MethodPost, "http://chaos.invalid/payments", bytes.NewReader(o.body))
	if err != nil {
		o.outcome("", 0, err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.client.Do(req)
	if err != nil {
		var apiErr *saferetry.APIError
		if errors.As(err, &apiErr) {
			o.outcome("", apiErr.StatusCode, err)
			return
		}
		o.outcome("", 0, err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		o.outcome("", resp.StatusCode, err)
		return
	}
	var p struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &p) != nil || p.ID == "" {
		o.outcome("", resp.StatusCode, fmt.Errorf("chaos: answer %d %.200s", resp.StatusCode, b))
		return
	}
	o.outcome(p.ID, resp.StatusCode, nil)
}

// newOps makes n operations with keys of their own.
func newOps(n int, run string) []*op {
	ops := make([]*op, n)
	for i := range ops {
		o := &op{
			key:       run + "-" + strconv.Itoa(i),
			amount:    1 + rand.Int64N(100),
			currency:  currencies[i%len(currencies)],
			recipient: "r" + strconv.Itoa(i%97),
		}
		o.body = fmt.Appendf(nil, `{"amount":%d,"currency":%q,"recipient":%q}`, o.amount, o.currency, o.recipient)
		ops[i] = o
	}
	return ops
}

// drive sends every operation from workers goroutines, at a pace that
// spreads them over at least minDuration, with a concurrent duplicate of
// the same key for a dupShare of them. It returns when every send has
// returned or ctx is done.
func (l *loader) drive(ctx context.Context, ops []*op, workers int, minDuration time.Duration, dupShare float64) {
	next := make(chan *op)
	go func() {
		defer close(next)
		var tick *time.Ticker
		if minDuration > 0 && len(ops) > 0 {
			tick = time.NewTicker(max(minDuration/time.Duration(len(ops)), time.Microsecond))
			defer tick.Stop()
		}
		for _, o := range ops {
			if tick != nil {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
			}
			select {
			case next <- o:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	var sent atomic.Int64
	if l.progress != nil {
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			t := time.NewTicker(progressEvery)
			defer t.Stop()
			begin := time.Now()
			for {
				select {
				case <-t.C:
					n := sent.Load()
					l.progress("chaos: %d of %d operations sent (%.0f/s)", n, len(ops), float64(n)/time.Since(begin).Seconds())
				case <-stop:
					return
				}
			}
		}()
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range next {
				sent.Add(1)
				if rand.Float64() < dupShare {
					dup := make(chan struct{})
					go func() { defer close(dup); l.send(ctx, o) }()
					l.send(ctx, o)
					<-dup
					continue
				}
				l.send(ctx, o)
			}
		}()
	}
	wg.Wait()
}

// settle resends, with the same keys, the operations that got no final
// answer, until each has one or patience runs out.
func (l *loader) settle(ctx context.Context, ops []*op, workers int, patience time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	for ctx.Err() == nil {
		var open []*op
		for _, o := range ops {
			if !o.isResolved() {
				open = append(open, o)
			}
		}
		if len(open) == 0 {
			return
		}
		l.drive(ctx, open, workers, 0, 0)
	}
}

// replay sends, once more and with the same keys, every operation that
// was answered with a payment, after the cell's faults and its final
// round: each is answered from the stored outcome, which must still name
// the payment its client was given (see Verdict.Overwritten). It returns
// when every send has returned or patience runs out.
func (l *loader) replay(ctx context.Context, ops []*op, workers int, patience time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	var answered []*op
	for _, o := range ops {
		o.mu.Lock()
		if len(o.ids) > 0 {
			answered = append(answered, o)
		}
		o.mu.Unlock()
	}
	l.drive(ctx, answered, workers, 0, 0)
}

func (l *loader) close() { l.base.CloseIdleConnections() }

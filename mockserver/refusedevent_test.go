package mockserver_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/mockserver"
)

// eventLog keeps the idempotency Middleware's events (idempotency.WithHook).
type eventLog struct {
	mu     sync.Mutex
	events []idempotency.Event
}

func (l *eventLog) hook(ev idempotency.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

func (l *eventLog) all() []idempotency.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]idempotency.Event(nil), l.events...)
}

// TestPaymentMediaTypeRefusedEvent: a request with a refused media type
// passed to the idempotency Middleware (its key's lookup failed) whose
// key the Middleware finds free holds no claim: its one event says so,
// with no token, and with the status it was answered. It was reported as
// a claim released (idempotency.OutcomeReleased, under the token
// math.MinInt64 of the claim that held nothing), and counted so by a hook
// such as otelidempotency's.
func TestPaymentMediaTypeRefusedEvent(t *testing.T) {
	ms := memstore.New()
	t.Cleanup(func() { ms.Close() })
	fail := new(atomic.Bool)
	var log eventLog
	srv := mockserver.New(mockserver.WithStore(flakyGetStore{ms, fail}),
		mockserver.WithIdempotencyOptions(idempotency.WithHook(log.hook)))
	defer srv.Close()
	fail.Store(true) // requireJSON's lookup fails; the Middleware's finds nothing
	h := http.Header{"Idempotency-Key": {"no-claim"}, "Content-Type": {"text/plain"}}
	resp, b := sendHeaders(t, srv, h, payBody)
	evs := log.all()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(evs), evs)
	}
	ev := evs[0]
	if ev.Outcome == idempotency.OutcomeReleased || ev.Token != 0 {
		t.Errorf("event %q with token %d for a request that held no claim; want another outcome, token 0", ev.Outcome, ev.Token)
	}
	if ev.Status != resp.StatusCode {
		t.Errorf("event status %d, answered %d %s", ev.Status, resp.StatusCode, b)
	}
}

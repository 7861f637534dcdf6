package outbox

import (
	"sync"
	"time"
)

// refusals is the set of topics that a Run's Publisher refused for now at
// the head of a batch (see outcome.stalled): the Run's claims leave their
// heads out for a poll interval, so that the other topics' messages,
// queued behind them, are published meanwhile, and the refused topic is
// tried again once per interval rather than handed, with the rest of the
// backlog, to a broker that refuses it batch after batch. A nil *refusals
// (RunOnce) holds nothing. It is safe for concurrent use by Run's workers.
type refusals struct {
	hold  time.Duration
	mu    sync.Mutex
	until map[string]time.Time
}

func newRefusals(hold time.Duration) *refusals {
	return &refusals{hold: hold, until: map[string]time.Time{}}
}

// add leaves topic out of the claims for the next hold.
func (f *refusals) add(topic string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.until[topic] = time.Now().Add(f.hold)
}

// topics returns the topics left out now, nil when none is.
func (f *refusals) topics() []string {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.until) == 0 {
		return nil
	}
	now := time.Now()
	var out []string
	for t, until := range f.until {
		if now.Before(until) {
			out = append(out, t)
		} else {
			delete(f.until, t)
		}
	}
	return out
}

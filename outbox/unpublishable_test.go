package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/saferetry/saferetry/outbox"
)

// TestUnpublishableFailsAtOnce: a message the Publisher refuses for good
// (a PublishError wrapping ErrUnpublishable) is failed after one attempt
// whatever WithMaxAttempts, kept with its error, and its Key's next message
// is published by the next batch; a failure for now (the same refusal
// without ErrUnpublishable) is retried and holds the Key meanwhile.
func TestUnpublishableFailsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cause error
		fails bool
	}{
		{"unpublishable", fmt.Errorf("bad header: %w", outbox.ErrUnpublishable), true},
		{"for now", errors.New("no ack"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, pool := newOutbox(t)
			ctx := context.Background()
			enqueue(t, pool, o, msg("a", "k"), msg("bad", "k"), msg("after", "k"))
			rec := &recorder{fail: func(_ int, msgs []outbox.Message) error {
				for i, m := range msgs {
					if m.ID == "bad" {
						return &outbox.PublishError{Index: i, Err: tc.cause}
					}
				}
				return nil
			}}
			drain(t, o.Relay(rec, outbox.WithMaxAttempts(math.MaxInt32), outbox.WithBackoff(time.Minute, time.Minute)))
			var ids []string
			for _, m := range rec.messages() {
				ids = append(ids, m.ID)
			}
			failed, err := o.Failed(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.fails {
				if len(failed) != 0 || len(ids) != 1 {
					t.Errorf("published %v, failed %+v; want a alone published, bad retried later, after behind it", ids, failed)
				}
				return
			}
			if fmt.Sprint(ids) != "[a after]" {
				t.Errorf("published %v, want [a after]", ids)
			}
			if len(failed) != 1 || failed[0].ID != "bad" || failed[0].Attempts != 1 ||
				failed[0].LastError != (&outbox.PublishError{Index: 1, Err: tc.cause}).Error() {
				t.Errorf("Failed = %+v; want bad, after 1 attempt, with its error", failed)
			}
		})
	}
}

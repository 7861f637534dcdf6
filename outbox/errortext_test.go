package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/saferetry/saferetry/outbox"
)

// TestFailureTextAnyBytes: a Publisher's error may quote anything (a
// response body, a binary reply). Its text holding a NUL byte or invalid
// UTF-8, which a PostgreSQL text column refuses, or being very long, must
// not keep the relay from marking the batch: the message published before
// the failure is marked published once, and the failing one counts its
// attempts until WithMaxAttempts marks it failed, with a readable
// last_error. Before storableError the failure mark failed, the whole mark
// transaction rolled back, and the relay published "ok" again on every
// pass and never failed "bad".
func TestFailureTextAnyBytes(t *testing.T) {
	for name, text := range map[string]string{
		"NUL":           "broker said \x00",
		"invalid UTF-8": "broker said \xff\xfe",
		"long":          strings.Repeat("é", 10000),
	} {
		t.Run(name, func(t *testing.T) {
			o, pool := newOutbox(t)
			ctx := context.Background()
			enqueue(t, pool, o, msg("ok", "a"), msg("bad", "b"))
			rec := &recorder{fail: func(_ int, msgs []outbox.Message) error {
				for i, m := range msgs {
					if m.ID == "bad" {
						return &outbox.PublishError{Index: i, Err: errors.New(text)}
					}
				}
				return nil
			}}
			r := o.Relay(rec, outbox.WithMaxAttempts(2), outbox.WithBackoff(time.Millisecond, time.Millisecond))
			for range 5 {
				if _, err := r.RunOnce(ctx); err != nil {
					t.Fatalf("RunOnce: %v", err)
				}
				time.Sleep(5 * time.Millisecond) // past the backoff
			}
			st, err := o.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			published := 0
			for _, m := range rec.messages() {
				if m.ID == "ok" {
					published++
				}
			}
			if st.Failed != 1 || st.Published != 1 || published != 1 {
				t.Fatalf("stats %+v, \"ok\" published %d times; want 1 published once, 1 failed", st, published)
			}
			var last string
			if err := pool.QueryRow(ctx, `SELECT last_error FROM `+o.Table()+` WHERE id = 'bad'`).Scan(&last); err != nil {
				t.Fatal(err)
			}
			if !utf8.ValidString(last) || strings.ContainsRune(last, 0) || len(last) > 4096 || !strings.Contains(last, text[:4]) {
				t.Errorf("last_error = %.80q (%d bytes); want valid UTF-8 without NUL, at most 4096 bytes, holding the error's text", last, len(last))
			}
		})
	}
}

package memstore

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// TestRemovalLeavesRepliesWhole: an entry that leaves the store lets go of
// its response (see shard.remove), and no reader sees that: a replay's
// Response taken before the entry was swept, dropped when touched or
// completed again stays whole, and replays and Gets racing sweeps, drops
// and new completions of the same keys never find a completed entry with
// a missing or empty response.
func TestRemovalLeavesRepliesWhole(t *testing.T) {
	ctx := context.Background()
	body := bytes.Repeat([]byte("0123456789"), 10)
	complete := func(t *testing.T, s *Store, k idempotency.Key, fp string) {
		t.Helper()
		r, err := s.Claim(ctx, k, fp, time.Minute, time.Minute)
		if err != nil || !r.Acquired {
			t.Fatalf("Claim: %+v, %v", r, err)
		}
		resp := idempotency.Response{Status: 201, Header: map[string][]string{"X-A": {"b"}}, Body: body}
		if err := s.Complete(ctx, k, r.Token, resp, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	whole := func(t *testing.T, what string, resp *idempotency.Response) {
		t.Helper()
		if resp == nil || resp.Status != 201 || !bytes.Equal(resp.Body, body) || resp.Header.Get("X-A") != "b" {
			t.Fatalf("%s: response %+v", what, resp)
		}
	}

	t.Run("held replay", func(t *testing.T) {
		for _, remove := range []struct {
			name string
			do   func(s *Store, k idempotency.Key, now time.Time)
		}{
			{"swept", func(s *Store, _ idempotency.Key, now time.Time) { s.sweep(now) }},
			{"dropped when touched", func(s *Store, k idempotency.Key, _ time.Time) { s.Get(ctx, k) }},
		} {
			t.Run(remove.name, func(t *testing.T) {
				s, clk := newFake(t)
				k := idempotency.Key{Key: "k"}
				complete(t, s, k, "fp")
				replay, err := s.Claim(ctx, k, "fp", time.Minute, time.Minute)
				if err != nil || replay.Acquired {
					t.Fatalf("replay: %+v, %v", replay, err)
				}
				clk.Advance(2 * time.Minute)
				remove.do(s, k, clk.Now())
				if s.count() != 0 {
					t.Fatal("the entry is still in the store")
				}
				whole(t, "a replay held across the removal", replay.Entry.Response)
				complete(t, s, k, "fp") // the key's next entry
				whole(t, "a replay held across the key's next completion", replay.Entry.Response)
			})
		}
	})

	t.Run("racing", func(t *testing.T) {
		s, clk := newFake(t)
		keys := make([]idempotency.Key, 8)
		for i := range keys {
			keys[i] = idempotency.Key{Key: strconv.Itoa(i)}
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var held *idempotency.Response // a replay's, checked when the race ends
				defer func() {
					if held != nil {
						whole(t, "a replay held to the end", held)
					}
				}()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					k := keys[(g+i)%len(keys)]
					if g%2 == 0 {
						e, found, err := s.Get(ctx, k)
						if err != nil {
							t.Error(err)
							return
						}
						if found && e.State == idempotency.StateCompleted {
							whole(t, "Get", e.Response)
						}
						continue
					}
					r, err := s.Claim(ctx, k, "fp", time.Minute, time.Minute)
					switch {
					case err != nil:
						t.Error(err)
						return
					case r.Acquired:
						resp := idempotency.Response{Status: 201, Header: map[string][]string{"X-A": {"b"}}, Body: body}
						if i%5 == 0 {
							s.Release(ctx, k, r.Token)
						} else if err := s.Complete(ctx, k, r.Token, resp, time.Minute); err != nil && !errors.Is(err, idempotency.ErrStaleToken) {
							t.Error(err) // (stale: the clock moved past the claim's ttl)
							return
						}
					case r.Entry.State == idempotency.StateCompleted:
						whole(t, "replay", r.Entry.Response)
						held = r.Entry.Response
					}
				}
			}()
		}
		for range 300 {
			clk.Advance(30 * time.Second)
			s.sweep(clk.Now())
		}
		close(stop)
		wg.Wait()
	})
}

package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

var errHookBug = errors.New("hook bug")

// TestClaimPanicAfterTheScriptFreesTheKey: a go-redis hook that panics
// after the claim script's answer came back (a bug in a tracing or
// metrics hook) raises its panic on the caller of Claim, and the claim
// that the script made is released: the answer, the claim's token, was in
// hand. It was lost with the panic, and the key stayed held, every retry
// answered "in progress", for the whole lease (20 s), on every path: a
// context that never ends, one that can (the caller's goroutine, with
// go-redis's default reads), and one on a client with
// ContextTimeoutEnabled (a goroutine of the Store's, which raises the
// panic again on the caller).
func TestClaimPanicAfterTheScriptFreesTheKey(t *testing.T) {
	const lease = 20 * time.Second // how long the key stayed held
	for _, tt := range []struct {
		name           string
		contextTimeout bool
		ctx            func() (context.Context, context.CancelFunc)
	}{
		{"background", false, func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"cancellable", false, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }},
		{"cancellable/ContextTimeoutEnabled", true, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Minute)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			direct, rdb, prefix := newStore(t)
			opt := *rdb.Options()
			opt.ContextTimeoutEnabled = tt.contextTimeout
			hooked := redis.NewClient(&opt)
			t.Cleanup(func() { hooked.Close() })
			hook := &panicAfterScript{}
			hooked.AddHook(hook)
			s := redisstore.New(hooked, redisstore.WithPrefix(prefix))
			mustClaim(t, s, idempotency.Key{Key: "warm"}, "fp", lease, time.Hour) // loads the script

			k := idempotency.Key{Key: "k"}
			ctx, cancel := tt.ctx()
			defer cancel()
			hook.armed.Store(true)
			p := func() (p any) {
				defer func() { p = recover() }()
				res, err := s.Claim(ctx, k, "fp", lease, time.Hour)
				t.Errorf("Claim whose hook panicked = %+v, %v; want the panic", res, err)
				return nil
			}()
			if err, _ := p.(error); !errors.Is(err, errHookBug) {
				t.Fatalf("Claim panicked with %v; want the hook's %v", p, errHookBug)
			}
			if n, err := rdb.Exists(context.Background(), entryName(prefix, k.Key)).Result(); err != nil || n != 1 {
				t.Fatalf("the entry exists: %d, %v; want the claim script to have run", n, err)
			}

			r, err := direct.Claim(context.Background(), k, "fp", lease, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Acquired {
				t.Errorf("a retry after the panic finds the key %v (lease left %v of %v); want the claim released",
					r.Entry.State, r.Entry.LeaseRemaining.Round(time.Second), lease)
			}
		})
	}
}

// panicAfterScript is a go-redis hook with a bug: once armed, the first
// script it sees panics after its answer came back.
type panicAfterScript struct{ armed atomic.Bool }

func (h *panicAfterScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *panicAfterScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if strings.HasPrefix(cmd.Name(), "eval") && h.armed.CompareAndSwap(true, false) {
			panic(errHookBug)
		}
		return err
	}
}

func (h *panicAfterScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

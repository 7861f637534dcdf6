package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
)

// sentScript keeps the command of the claim script that a Claim sent, so
// that a claim whose answer came back before a panic cut the Claim short
// (a go-redis hook's, after the script returned) can be released (see
// releaseSent): the Store keeps each EVALSHA or EVAL in it before sending
// it, as go-redis's own would be lost, with its answer, to a hook that
// panics. It is used by one goroutine.
type sentScript struct {
	cmd *redis.Cmd
}

// keep keeps cmd; on a nil sentScript it does nothing.
func (sent *sentScript) keep(cmd *redis.Cmd) {
	if sent != nil {
		sent.cmd = cmd
	}
}

// releaseSent releases the claim that sent's script acquired when a panic
// (or runtime.Goexit) cut its Claim short after the answer came back: the
// answer, held in the command, is lost with the panic, and the key would
// stay held, every retry answered "in progress", for the whole lease. The
// claim's token is the server's (the claim script draws it from TIME), so
// only the answer tells it, and the answer holds it only when the script
// acquired (isAcquired); a release by that token is fenced like any
// Release, so it frees that claim and nothing else, even one taken over
// since. A command without an answer (the hook panicked before sending
// it, or its read failed) acquired nothing that can be told, and is left
// alone. The release runs as the panic unwinds, without recovering it,
// so that the caller's recover gets the panic and its stack as they were;
// a panic of the release's own (the same hook) is dropped. ctx is the one
// the script was sent under; on a client that reads under its
// ReadTimeout alone, its end does not keep the release from being sent.
func (s *Store) releaseSent(ctx context.Context, k idempotency.Key, sent *sentScript) {
	if sent.cmd == nil {
		return
	}
	res, err := sent.cmd.Result()
	tok, _, ok := acquired(res)
	if err != nil || !ok {
		return
	}
	if !s.deadlineReads {
		ctx = context.WithoutCancel(ctx)
	}
	defer func() { _ = recover() }() // the release's own panic: see above
	_ = s.Release(ctx, k, tok)       // it failed: the claim lapses with its lease
}

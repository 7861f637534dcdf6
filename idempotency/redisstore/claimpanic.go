package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
)

// sentScript keeps the command of the claim script that a Claim sent, so
// that a claim whose answer came back before a panic cut the Claim short
// (a go-redis hook's, after the script returned) can be released (see
// releaseSent). It is the redis.Scripter that Script.Run sends the script
// through: the Store's client, with each EVALSHA or EVAL kept before it
// is sent, as go-redis's own would be lost, with its answer, to a hook
// that panics. The command is the one go-redis's Eval and EvalSha make,
// for the keys and arguments that the claim script takes (go-redis
// flattens a slice or a map only when it is the one argument; the script
// takes three). A pointer, it costs no allocation to pass as a Scripter,
// and it holds the script's key (see keys), so that keeping the command
// costs the Claim no allocation either. Made with the client, it keeps
// nothing yet; it is used by one goroutine.
type sentScript struct {
	redis.UniversalClient
	cmd *redis.Cmd
	key [1]string
}

// keys returns the script's keys, key alone: in sent, when not nil, else
// in a slice of their own.
func (sent *sentScript) keys(key string) []string {
	if sent == nil {
		return []string{key}
	}
	sent.key[0] = key
	return sent.key[:]
}

// keep keeps cmd; on a nil sentScript it does nothing.
func (sent *sentScript) keep(cmd *redis.Cmd) {
	if sent != nil {
		sent.cmd = cmd
	}
}

func (sent *sentScript) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return sent.eval(ctx, "evalsha", sha1, keys, args)
}

func (sent *sentScript) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return sent.eval(ctx, "eval", script, keys, args)
}

func (sent *sentScript) eval(ctx context.Context, name, payload string, keys []string, args []any) *redis.Cmd {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, name, payload, len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmd := redis.NewCmd(ctx, append(cmdArgs, args...)...)
	cmd.SetFirstKeyPos(3) // where a cluster client finds the key to route by
	sent.keep(cmd)
	_ = sent.Process(ctx, cmd)
	return cmd
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

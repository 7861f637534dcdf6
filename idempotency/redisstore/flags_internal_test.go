package redisstore

import (
	"errors"
	"fmt"
	"testing"
)

// TestFlagsUnknown: a server that does not take the allow-oom scripts'
// shebang line (Redis before 7 reads it as Lua; a server that reads
// shebangs may not know the flag) makes the Store settle with the plain
// scripts; any other error, an OOM refusal above all, does not. No Redis
// older than 7 is at hand here, so the replies are those servers' words.
func TestFlagsUnknown(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{replyError("ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'"), true},
		{fmt.Errorf("redisstore: complete: %w", replyError("ERR Error compiling script (new function): user_script:1: '=' expected near '#'")), true},
		{replyError("ERR Unexpected flag in script shebang: allow-oom"), true},
		{replyError("ERR Unknown lua shebang option: flags"), true},
		{replyError("READONLY Can not run script with write flag on readonly replica"), false},
		{replyError("MISCONF Errors writing to the AOF file. Use 'no-writes' flag to run a script that does not write."), false},
		{replyError("OOM command not allowed when used memory > 'maxmemory'. script: 1a2b, on @user_script:7."), false},
		{replyError("NOSCRIPT No matching script. Please use EVAL."), false},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"), false},
		{nil, false},
	} {
		if got := flagsUnknown(c.err); got != c.want {
			t.Errorf("flagsUnknown(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

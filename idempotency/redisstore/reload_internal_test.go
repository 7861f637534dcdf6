package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestUnreachable: which errors of a call say that its node is gone, so
// that a cluster client's slot map is reloaded.
func TestUnreachable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"dial refused", refused, true},
		{"dial refused, wrapped", fmt.Errorf("redisstore: claim: %w", refused), true},
		{"read timeout", readTimeout, true},
		{"connection closed", io.EOF, true},
		{"connection reset", syscall.ECONNRESET, true},
		{"cluster down", replyError("CLUSTERDOWN The cluster is down"), true},
		{"context cancelled", context.Canceled, false},
		{"context deadline", context.DeadlineExceeded, false},
		{"a reply", replyError("ERR unknown command"), false},
		{"moved", replyError("MOVED 3999 127.0.0.1:6381"), false},
		{"a string that says CLUSTERDOWN", errors.New("CLUSTERDOWN"), false},
		{"nil reply", redis.Nil, false},
		{"not replicated", ErrNotReplicated, false},
	} {
		if got := unreachable(c.err); got != c.want {
			t.Errorf("%s: unreachable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestStaleMap: which replies say that the slot map is out of date.
func TestStaleMap(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{replyError("MOVED 3999 127.0.0.1:6381"), true},
		{replyError("ASK 3999 127.0.0.1:6381"), true},
		{replyError("READONLY You can't write against a read only replica."), true},
		{replyError("ERR unknown command"), false},
		{errors.New("MOVED 3999 127.0.0.1:6381"), false},
		{io.EOF, false},
	} {
		if got := staleMap(c.err); got != c.want {
			t.Errorf("staleMap(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// replyError is an error reply of a Redis server, as go-redis types it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

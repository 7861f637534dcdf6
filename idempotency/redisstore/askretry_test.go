package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/redisstore"
)

// TestWithWaitAskTargetIsNotResent: WithWait's pipeline follows an ASK
// over a client of its own, made from the node's options, whose
// MaxRetries of 0 (none, in a node made from go-redis's default
// ClusterOptions) a new client would read as three retries. That client must not
// resend what go-redis's cluster client would not: a claim script whose
// answer was lost may have acquired, and sent again it finds that claim
// and answers "in progress", so that nobody runs the handler and every
// retry of the request is told "in progress" until the lease lapses. Two
// fake nodes play the cluster: the source answers ASK to the script, the
// target reads the pipeline, counts the script and closes the connection
// without answering, as a connection cut after the write would.
func TestWithWaitAskTargetIsNotResent(t *testing.T) {
	var scripts atomic.Int64
	target := fakeNode(t, func(cmd []string) (string, bool) {
		switch cmd[0] {
		case "EVALSHA", "EVAL":
			scripts.Add(1)
			return "", true // applied, and the answer lost
		case "ASKING":
			return "", false // answered with the script's, never
		}
		return "-ERR unknown command\r\n", false
	})
	source := fakeNode(t, func(cmd []string) (string, bool) {
		switch cmd[0] {
		case "EVALSHA", "EVAL":
			return "-ASK 0 " + target + "\r\n", false
		case "WAIT":
			return ":1\r\n", false
		}
		return "-ERR unknown command\r\n", false
	})
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: source}}}}, nil
		},
	})
	t.Cleanup(func() { cc.Close() })
	s := redisstore.New(cc, redisstore.WithWait(1, time.Second))
	res, err := s.Claim(context.Background(), idempotency.Key{Key: "asked"}, "fp", longLease, longTTL)
	if n := scripts.Load(); n != 1 {
		t.Errorf("the ASK target got the claim script %d times, want once (not resent after its answer was lost)", n)
	}
	if err == nil {
		t.Errorf("Claim = %+v, nil; want the lost answer's error", res)
	}
}

// fakeNode serves RESP on a loopback port of its own until the test ends,
// answering each command with what answer returns for it (its name in
// upper case first), or closing the connection, without an answer, when
// it says so. It returns the address.
func fakeNode(t *testing.T, answer func(cmd []string) (reply string, hangUp bool)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				rd := bufio.NewReader(conn)
				for {
					cmd, err := readCommand(rd)
					if err != nil {
						return
					}
					cmd[0] = strings.ToUpper(cmd[0])
					reply, hangUp := answer(cmd)
					if hangUp {
						return
					}
					if _, err := conn.Write([]byte(reply)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// readCommand reads one command, an array of bulk strings, as clients
// send them.
func readCommand(rd *bufio.Reader) ([]string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("array header %q", line)
	}
	cmd := make([]string, n)
	for i := range cmd {
		line, err := rd.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil {
			return nil, fmt.Errorf("bulk header %q", line)
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		cmd[i] = string(buf[:size])
	}
	return cmd, nil
}

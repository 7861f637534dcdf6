package mockcmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// errPlainRedis is the cause of a start whose -store URL says rediss://
// while the server at its address speaks Redis without TLS. Waiting
// cannot cure it, so the start fails at once (it is not transient).
var errPlainRedis = errors.New("TLS handshake failed: the server answers plain Redis, without TLS")

// aLongTimeAgo is a deadline in the past: set on a connection, it ends
// the read or write in progress at once.
var aLongTimeAgo = time.Unix(1, 0)

// plainConfirmWait bounds the TLS handshake that confirms a plain answer
// (see refusePlainRedis): a server with TLS answers a ClientHello within
// a round trip, and a Redis without TLS never does.
const plainConfirmWait = time.Second

// refusePlainRedis returns an error matching errPlainRedis when the server
// at the other end of conn, a fresh connection that a rediss:// URL names,
// answers a plain PING and not a TLS handshake. A Redis without TLS reads
// a TLS ClientHello as the start of an inline command and waits for its
// end, so that the handshake would only end with the attempt's deadline,
// reported as such. A server with TLS alone answers the PING with an
// alert or by closing the connection, and one that does not answer at
// all keeps it until ctx ends; both leave the diagnosis to the client's
// attempt, as before. A server that takes both on one port (a managed
// Redis migrating its clients to TLS) answers the PING too: the
// handshake, on a connection of dial's, with config, tells it apart (see
// answersTLS).
func refusePlainRedis(ctx context.Context, conn net.Conn, dial func(context.Context) (net.Conn, error), config *tls.Config) error {
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(aLongTimeAgo) })
	defer stop()
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return nil
	}
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil {
		return nil
	}
	// '+': PONG; '-': an error such as NOAUTH, from a Redis all the same.
	// A TLS alert record begins with 0x15.
	if b[0] != '+' && b[0] != '-' {
		return nil
	}
	if answersTLS(ctx, dial, config) {
		return nil
	}
	return fmt.Errorf("mockserver: redis at %s: %w (the -store URL says rediss://: use redis://, or enable TLS on the server)",
		conn.RemoteAddr(), errPlainRedis)
}

// answersTLS reports whether the server that dial reaches answers a TLS
// handshake with config within plainConfirmWait: true when the handshake
// succeeds or fails on TLS's terms (an alert, a certificate that does not
// verify: the client's attempt reports it), and when the dial fails or ctx
// is cancelled (no verdict); false when the server answers in plain bytes
// or not at all.
func answersTLS(ctx context.Context, dial func(context.Context) (net.Conn, error), config *tls.Config) bool {
	hctx, cancel := context.WithTimeout(ctx, plainConfirmWait)
	defer cancel()
	conn, err := dial(hctx)
	if err != nil {
		return true
	}
	defer conn.Close()
	err = tls.Client(conn, config.Clone()).HandshakeContext(hctx)
	var plain tls.RecordHeaderError
	return err == nil || !(errors.As(err, &plain) || errors.Is(hctx.Err(), context.DeadlineExceeded))
}

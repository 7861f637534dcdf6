package main

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/saferetry/saferetry/internal/testenv"
)

// startTLSRedis starts a TLS front for the test's Redis: a connection that
// begins with a TLS handshake is decrypted and relayed to Redis; with
// plainToo, one that begins otherwise is relayed as it is (a port that
// takes both, as a managed Redis migrating to TLS offers), and without it,
// closed (as stunnel or a Redis with TLS alone does). It returns the
// front's address; the front ends with the test.
func startTLSRedis(t *testing.T, plainToo bool) string {
	t.Helper()
	u, err := url.Parse(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	certSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	certSrv.StartTLS()
	cfg := certSrv.TLS.Clone()
	certSrv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	serve := func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		first, err := br.Peek(1)
		if err != nil {
			return
		}
		var client io.ReadWriter = struct {
			io.Reader
			io.Writer
		}{br, c}
		if first[0] == 0x16 { // a TLS handshake record
			tc := tls.Server(&peekedConn{Conn: c, r: br}, cfg)
			if tc.Handshake() != nil {
				return
			}
			client = tc
		} else if !plainToo {
			return
		}
		up, err := net.Dial("tcp", u.Host)
		if err != nil {
			return
		}
		defer up.Close()
		go func() { _, _ = io.Copy(up, client); _ = up.Close() }()
		_, _ = io.Copy(client, up)
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serve(c) })
		}
	})
	return ln.Addr().String()
}

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestRedissToTLSRedisServes: a rediss:// store URL naming a Redis that
// speaks TLS starts the mock server, which serves a payment: behind a
// TLS-only front, and behind one that takes TLS and plain Redis on one
// port (as a managed Redis migrating its clients to TLS does), which
// answers the start's plain PING like a Redis without TLS.
func TestRedissToTLSRedisServes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		plainToo bool
	}{{"TLS only", false}, {"TLS or plain on one port", true}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := startTLSRedis(t, tc.plainToo)
			u, _, stderr, stop := startCapturing(t, "-store", "rediss://"+addr+"/0?skip_verify=true",
				"-namespace", testenv.RandomName("rediss"), "-store-wait", "5s")
			if resp := post(t, u, "rediss-"+strings.ReplaceAll(tc.name, " ", "-")); resp.StatusCode != http.StatusCreated {
				t.Errorf("payment: %d, want 201", resp.StatusCode)
			}
			if err := stop(); err != nil {
				t.Errorf("run: %v (stderr %q)", err, stderr.String())
			}
		})
	}
}

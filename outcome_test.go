package saferetry

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/internal/testkit"
)

// outcomeRun is what one case of TestFinalErrorClass sends, through what,
// and how to count what reached the server.
type outcomeRun struct {
	base    http.RoundTripper
	req     *http.Request
	reached *atomic.Int32 // requests (or connections) that reached the server; nil: none can
}

// TestFinalErrorClass sends a keyed POST over real sockets into each way
// an attempt can fail and checks the class of the final error
// (ErrNotSent only when nothing can have reached the server, else
// ErrOutcomeUnknown), that errors.Is and errors.As still find the
// underlying cause, the attempts made, and what reached the server.
func TestFinalErrorClass(t *testing.T) {
	errBody := errors.New("body source failed")
	tests := []struct {
		name     string
		setup    func(t *testing.T) outcomeRun
		opts     []Option
		want     error   // ErrNotSent or ErrOutcomeUnknown
		is       []error // causes errors.Is must find as well
		as       []any   // pointers to types errors.As must find
		attempts int
		reached  int32 // -1: not checked
	}{
		{
			name: "dial refused",
			setup: func(t *testing.T) outcomeRun {
				return outcomeRun{base: netBase(t), req: outcomePost(t, context.Background(), "http://"+testkit.RefusedAddr(t), nil)}
			},
			want: ErrNotSent, as: []any{new(*net.OpError)}, attempts: 2,
		},
		{
			name: "context done before the dial",
			setup: func(t *testing.T) outcomeRun {
				url, n := testkit.CountingServer(t)
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return outcomeRun{base: netBase(t), req: outcomePost(t, ctx, url, nil), reached: n}
			},
			want: ErrNotSent, is: []error{context.Canceled}, attempts: 0,
		},
		{
			name: "context cancelled during the dial (held by DialContext)",
			setup: func(t *testing.T) outcomeRun {
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				base := &http.Transport{DialContext: func(dctx context.Context, _, _ string) (net.Conn, error) {
					cancel()
					<-dctx.Done()
					return nil, dctx.Err()
				}}
				return outcomeRun{base: base, req: outcomePost(t, ctx, "http://"+testkit.RefusedAddr(t), nil)}
			},
			want: ErrNotSent, is: []error{context.Canceled}, attempts: 1,
		},
		{
			name: "context cancelled during the dial (full accept queue)",
			setup: func(t *testing.T) outcomeRun {
				addr := testenv.FullQueueAddr(t)
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				time.AfterFunc(50*time.Millisecond, cancel)
				return outcomeRun{base: netBase(t), req: outcomePost(t, ctx, "http://"+addr, nil)}
			},
			want: ErrNotSent, is: []error{context.Canceled}, attempts: 1,
		},
		{
			name: "deadline during the dial (full accept queue)",
			setup: func(t *testing.T) outcomeRun {
				addr := testenv.FullQueueAddr(t)
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				t.Cleanup(cancel)
				return outcomeRun{base: netBase(t), req: outcomePost(t, ctx, "http://"+addr, nil)}
			},
			want: ErrNotSent, is: []error{context.DeadlineExceeded}, attempts: 1,
		},
		{
			name: "attempt timeouts during the dial (full accept queue)",
			setup: func(t *testing.T) outcomeRun {
				return outcomeRun{base: netBase(t), req: outcomePost(t, context.Background(), "http://"+testenv.FullQueueAddr(t), nil)}
			},
			opts: []Option{WithAttemptTimeout(50 * time.Millisecond)},
			want: ErrNotSent, is: []error{context.DeadlineExceeded}, attempts: 2,
		},
		{
			name: "TLS certificate refused",
			setup: func(t *testing.T) outcomeRun {
				var n atomic.Int32
				srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
				srv.Config.ErrorLog = discardLog()
				t.Cleanup(srv.Close)
				return outcomeRun{base: netBase(t), req: outcomePost(t, context.Background(), srv.URL, nil), reached: &n}
			},
			want: ErrNotSent, as: []any{new(*tls.CertificateVerificationError), new(x509.UnknownAuthorityError)}, attempts: 1,
		},
		{
			// The server cuts the TLS handshake: the error is a reset or
			// an EOF, yet only a ClientHello was sent.
			name: "TLS handshake cut by the server",
			setup: func(t *testing.T) outcomeRun {
				return outcomeRun{base: netBase(t), req: outcomePost(t, context.Background(), "https://"+closingListener(t, false, nil), nil)}
			},
			want: ErrNotSent, attempts: 2,
		},
		{
			// The server refuses the TLS version the client offers: an
			// alert ends the handshake, before any of the request, and
			// would end every other attempt's.
			name: "TLS handshake refused by the server",
			setup: func(t *testing.T) outcomeRun {
				var n atomic.Int32
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
				srv.Config.ErrorLog = discardLog()
				srv.TLS = &tls.Config{MinVersion: tls.VersionTLS13}
				srv.StartTLS()
				t.Cleanup(srv.Close)
				base := netBase(t)
				base.TLSClientConfig = &tls.Config{MaxVersion: tls.VersionTLS12, RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
				return outcomeRun{base: base, req: outcomePost(t, context.Background(), srv.URL, nil), reached: &n}
			},
			want: ErrNotSent, attempts: 1,
		},
		{
			name: "proxy refuses CONNECT",
			setup: func(t *testing.T) outcomeRun {
				var forwarded atomic.Int32
				proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodConnect {
						forwarded.Add(1)
					}
					w.WriteHeader(http.StatusForbidden)
				}))
				t.Cleanup(proxy.Close)
				return outcomeRun{base: proxyBase(t, proxy.URL), req: outcomePost(t, context.Background(), "https://origin.invalid/payments", nil), reached: &forwarded}
			},
			want: ErrNotSent, attempts: 2,
		},
		{
			name: "proxy asks for credentials on CONNECT (407)",
			setup: func(t *testing.T) outcomeRun {
				var forwarded atomic.Int32
				proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodConnect {
						forwarded.Add(1)
					}
					w.Header().Set("Proxy-Authenticate", `Basic realm="proxy"`)
					w.WriteHeader(http.StatusProxyAuthRequired)
				}))
				t.Cleanup(proxy.Close)
				return outcomeRun{base: proxyBase(t, proxy.URL), req: outcomePost(t, context.Background(), "https://origin.invalid/payments", nil), reached: &forwarded}
			},
			want: ErrNotSent, attempts: 2,
		},
		{
			name: "proxy closes on CONNECT",
			setup: func(t *testing.T) outcomeRun {
				addr := closingListener(t, true, nil)
				return outcomeRun{base: proxyBase(t, "http://"+addr), req: outcomePost(t, context.Background(), "https://origin.invalid/payments", nil)}
			},
			want: ErrNotSent, attempts: 2,
		},
		{
			name: "proxy dial refused",
			setup: func(t *testing.T) outcomeRun {
				return outcomeRun{base: proxyBase(t, "http://"+testkit.RefusedAddr(t)), req: outcomePost(t, context.Background(), "https://origin.invalid/payments", nil)}
			},
			want: ErrNotSent, as: []any{new(*net.OpError)}, attempts: 2,
		},
		{
			name: "plain proxy closes after reading the request",
			setup: func(t *testing.T) outcomeRun {
				var n atomic.Int32
				addr := closingListener(t, true, &n)
				return outcomeRun{base: proxyBase(t, "http://"+addr), req: outcomePost(t, context.Background(), "http://origin.invalid/payments", nil), reached: &n}
			},
			want: ErrOutcomeUnknown, attempts: 2, reached: 2,
		},
		{
			// net/http wraps the handshake's error in a "proxyconnect"
			// *net.OpError: only a ClientHello reached the proxy.
			name: "https proxy's certificate refused",
			setup: func(t *testing.T) outcomeRun {
				var n atomic.Int32
				proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
				proxy.Config.ErrorLog = discardLog()
				proxy.StartTLS()
				t.Cleanup(proxy.Close)
				return outcomeRun{base: proxyBase(t, proxy.URL), req: outcomePost(t, context.Background(), "http://origin.invalid/payments", nil), reached: &n}
			},
			want: ErrNotSent, as: []any{new(*net.OpError)}, attempts: 1,
		},
		{
			// The tunnel is up; the origin's handshake fails before a
			// byte of the request is written (the error is the TLS one,
			// not "proxyconnect").
			name: "CONNECT accepted, origin's certificate refused",
			setup: func(t *testing.T) outcomeRun {
				var n atomic.Int32
				origin := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
				origin.Config.ErrorLog = discardLog()
				origin.StartTLS()
				t.Cleanup(origin.Close)
				return outcomeRun{base: proxyBase(t, tunnelProxy(t, origin.Listener.Addr().String())), req: outcomePost(t, context.Background(), origin.URL+"/payments", nil), reached: &n}
			},
			want: ErrNotSent, as: []any{new(*tls.CertificateVerificationError)}, attempts: 1,
		},
		{
			// A SOCKS5 proxy's refusal is a "socks connect" *net.OpError,
			// not "proxyconnect": the SOCKS handshake comes before any of
			// the request is written, so nothing was sent.
			name: "socks5 proxy refuses the connect",
			setup: func(t *testing.T) outcomeRun {
				return outcomeRun{base: proxyBase(t, "socks5://"+refusingSOCKS5(t)), req: outcomePost(t, context.Background(), "http://origin.invalid/payments", nil)}
			},
			want: ErrNotSent, attempts: 2,
		},
		{
			// A plain proxy is sent the request itself: one that forwarded
			// it and died before answering may have had it executed.
			name: "plain proxy forwards the request, then dies",
			setup: func(t *testing.T) outcomeRun {
				origin, n := outcomeServer(t, func(w http.ResponseWriter, r *http.Request) {})
				proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					out, _ := http.NewRequest(r.Method, origin+r.URL.Path, r.Body)
					out.Header = r.Header.Clone()
					if resp, err := http.DefaultTransport.RoundTrip(out); err == nil {
						resp.Body.Close()
					}
					reset(w)
				}))
				proxy.Config.ErrorLog = discardLog()
				proxy.Start()
				t.Cleanup(proxy.Close)
				return outcomeRun{base: proxyBase(t, proxy.URL), req: outcomePost(t, context.Background(), "http://origin.invalid/payments", strings.NewReader(`{"amount":1500}`)), reached: n}
			},
			want: ErrOutcomeUnknown, attempts: 2, reached: 2,
		},
		{
			name: "listener accepts and closes",
			setup: func(t *testing.T) outcomeRun {
				var n atomic.Int32
				addr := closingListener(t, false, &n)
				return outcomeRun{base: netBase(t), req: outcomePost(t, context.Background(), "http://"+addr, nil), reached: &n}
			},
			want: ErrOutcomeUnknown, attempts: 2, reached: 2,
		},
		{
			name: "listener never accepts (the kernel completes the handshake)",
			setup: func(t *testing.T) outcomeRun {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ln.Close() })
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				t.Cleanup(cancel)
				return outcomeRun{base: netBase(t), req: outcomePost(t, ctx, "http://"+ln.Addr().String(), nil)}
			},
			want: ErrOutcomeUnknown, is: []error{context.DeadlineExceeded}, attempts: 1,
		},
		{
			name: "server resets after reading the headers",
			setup: func(t *testing.T) outcomeRun {
				url, n := outcomeServer(t, func(w http.ResponseWriter, r *http.Request) { reset(w) })
				return outcomeRun{base: netBase(t), req: outcomePost(t, context.Background(), url, strings.NewReader(strings.Repeat("x", 1<<20))), reached: n}
			},
			want: ErrOutcomeUnknown, attempts: 2, reached: 2,
		},
		{
			name: "server dies after reading the body",
			setup: func(t *testing.T) outcomeRun {
				url, n := outcomeServer(t, func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					reset(w)
				})
				return outcomeRun{base: netBase(t), req: outcomePost(t, context.Background(), url, strings.NewReader(`{"amount":1500}`)), reached: n}
			},
			want: ErrOutcomeUnknown, attempts: 2, reached: 2,
		},
		{
			name: "body fails while buffered, before any attempt",
			setup: func(t *testing.T) outcomeRun {
				url, n := testkit.CountingServer(t)
				body := io.MultiReader(strings.NewReader(`{"amount":`), failingReader{errBody})
				return outcomeRun{base: netBase(t), req: outcomePost(t, context.Background(), url, body), reached: n}
			},
			want: ErrNotSent, is: []error{errBody}, attempts: 0,
		},
		{
			name: "body fails mid-way through the write",
			setup: func(t *testing.T) outcomeRun {
				url, _ := outcomeServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
				body := io.MultiReader(strings.NewReader(`{"amount":1500,"note":"`), failingReader{errBody})
				return outcomeRun{base: netBase(t), req: outcomePost(t, context.Background(), url, body)}
			},
			opts: []Option{WithMaxBufferedBody(4)},
			want: ErrOutcomeUnknown, is: []error{errBody}, attempts: 1, reached: -1,
		},
		{
			name: "context cancelled during the write",
			setup: func(t *testing.T) outcomeRun {
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				url, n := outcomeServer(t, func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.ReadFull(r.Body, make([]byte, 1))
					cancel() // the client is still writing the body
					_, _ = io.Copy(io.Discard, r.Body)
				})
				pr, pw := io.Pipe()
				go func() {
					_, _ = pw.Write([]byte(`{"amount":`))
					// The rest comes after the cancel, never: net/http
					// waits for its write to end, which a read from a
					// producer that never ends would not.
					<-ctx.Done()
					pw.CloseWithError(errors.New("producer stopped"))
				}()
				req := outcomePost(t, ctx, url, pr)
				req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("no second body") }
				return outcomeRun{base: netBase(t), req: req, reached: n}
			},
			want: ErrOutcomeUnknown, is: []error{context.Canceled}, attempts: 1, reached: 1,
		},
		{
			name: "context cancelled while waiting for the headers",
			setup: func(t *testing.T) outcomeRun {
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				url, n := outcomeServer(t, func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					cancel()
					<-r.Context().Done()
				})
				return outcomeRun{base: netBase(t), req: outcomePost(t, ctx, url, strings.NewReader(`{"amount":1500}`)), reached: n}
			},
			want: ErrOutcomeUnknown, is: []error{context.Canceled}, attempts: 1, reached: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := tt.setup(t)
			opts := append([]Option{WithBackoff(constBackoff(time.Millisecond)), WithMaxAttempts(2)}, tt.opts...)
			resp, err := NewTransport(run.base, opts...).RoundTrip(run.req)
			if resp != nil {
				resp.Body.Close()
				t.Fatalf("got a response (%d), want an error", resp.StatusCode)
			}
			other := ErrOutcomeUnknown
			if tt.want == ErrOutcomeUnknown {
				other = ErrNotSent
			}
			if !errors.Is(err, tt.want) || errors.Is(err, other) {
				t.Errorf("err = %v; want %v", err, tt.want)
			}
			for _, cause := range tt.is {
				if !errors.Is(err, cause) {
					t.Errorf("err = %v; errors.Is does not find %v", err, cause)
				}
			}
			for _, target := range tt.as {
				if !errors.As(err, target) {
					t.Errorf("err = %v; errors.As finds no %T", err, target)
				}
			}
			var e *Error
			if errors.As(err, &e) && e.Attempts != tt.attempts {
				t.Errorf("attempts = %d, want %d (err = %v)", e.Attempts, tt.attempts, err)
			}
			if tt.reached >= 0 {
				var got int32
				if run.reached != nil {
					got = run.reached.Load()
				}
				if got != tt.reached {
					t.Errorf("%d reached the server, want %d", got, tt.reached)
				}
			}
		})
	}
}

// netBase is a net/http Transport of the test's own, its idle connections
// closed when t ends.
func netBase(t *testing.T) *http.Transport {
	b := &http.Transport{}
	t.Cleanup(b.CloseIdleConnections)
	return b
}

// proxyBase is a net/http Transport sending everything through proxy.
func proxyBase(t *testing.T, proxy string) *http.Transport {
	u, err := url.Parse(proxy)
	if err != nil {
		t.Fatal(err)
	}
	b := netBase(t)
	b.Proxy = http.ProxyURL(u)
	return b
}

// outcomePost is a keyed POST (the Transport generates the key) to url.
func outcomePost(t *testing.T, ctx context.Context, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// outcomeServer starts a server running h and counting the requests that
// reached it; it is closed when t ends.
func outcomeServer(t *testing.T, h http.HandlerFunc) (string, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	srv.Config.ErrorLog = discardLog()
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

// reset drops the handler's connection with a TCP reset.
func reset(w http.ResponseWriter) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// closingListener accepts connections and closes each at once, or, with
// readHead, once it has read a request head (a CONNECT, or a request to a
// plain proxy). It counts the connections in n, if not nil, and returns
// its address; it is closed when t ends.
func closingListener(t *testing.T, readHead bool, n *atomic.Int32) string {
	return serveConns(t, func(c net.Conn) {
		if n != nil {
			n.Add(1)
		}
		if readHead {
			_, _ = http.ReadRequest(bufio.NewReader(c))
		}
	})
}

// serveConns listens on a loopback port, hands each connection to handle
// in turn and closes it after, and returns the address; the listener is
// closed, and its loop waited for, when t ends.
func serveConns(t *testing.T, handle func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c)
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// tunnelProxy is an HTTP proxy that answers every CONNECT with a tunnel
// to target (whatever the CONNECT names) and returns its URL; it is closed
// when t ends.
func tunnelProxy(t *testing.T, target string) string {
	proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		up, err := net.Dial("tcp", target)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		defer up.Close()
		w.WriteHeader(http.StatusOK)
		c, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_ = brw.Flush()
		go func() { _, _ = io.Copy(up, brw); up.Close() }()
		_, _ = io.Copy(c, up)
	}))
	proxy.Config.ErrorLog = discardLog()
	proxy.Start()
	t.Cleanup(proxy.Close)
	return proxy.URL
}

// refusingSOCKS5 is a SOCKS5 proxy (RFC 1928) that accepts no
// authentication and answers every CONNECT "connection refused" (5); it
// returns its address and is closed when t ends.
func refusingSOCKS5(t *testing.T) string {
	return serveConns(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		head := make([]byte, 2)
		if _, err := io.ReadFull(br, head); err != nil {
			return
		}
		_, _ = io.ReadFull(br, make([]byte, head[1])) // the methods
		_, _ = c.Write([]byte{5, 0})                  // no authentication
		req := make([]byte, 4)
		if _, err := io.ReadFull(br, req); err == nil {
			_, _ = c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		}
	})
}

// failingReader fails every read with its error.
type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

// discardLog is a server's error log that drops what it is given (TLS
// handshakes refused by the client, hijacked connections).
func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }

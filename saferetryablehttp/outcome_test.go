package saferetryablehttp

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/testkit"
)

// TestNoConnectionIsNotSent: attempts that never got a connection (a dial
// its context ended, a proxy that refused or could not be reached) sent
// nothing, whatever their error: the adapter reports ErrNotSent, with the
// cause still found by errors.Is. An attempt that got one (a server that
// executed the payment and went down) stays ErrOutcomeUnknown.
func TestNoConnectionIsNotSent(t *testing.T) {
	proxyTo := func(t *testing.T, proxy string) *http.Transport {
		u, _ := url.Parse(proxy)
		return &http.Transport{Proxy: http.ProxyURL(u)}
	}
	tests := []struct {
		name  string
		setup func(t *testing.T) (http.RoundTripper, *retryablehttp.Request)
		want  error
		is    error
	}{
		{"dial cancelled", func(t *testing.T) (http.RoundTripper, *retryablehttp.Request) {
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			base := &http.Transport{DialContext: func(dctx context.Context, _, _ string) (net.Conn, error) {
				cancel()
				<-dctx.Done()
				return nil, dctx.Err()
			}}
			req, _ := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, "http://"+testkit.RefusedAddr(t), []byte(`{}`))
			return base, req
		}, saferetry.ErrNotSent, context.Canceled},
		{"proxy refuses CONNECT", func(t *testing.T) (http.RoundTripper, *retryablehttp.Request) {
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusForbidden) }))
			t.Cleanup(proxy.Close)
			req, _ := retryablehttp.NewRequest(http.MethodPost, "https://origin.invalid/payments", []byte(`{}`))
			return proxyTo(t, proxy.URL), req
		}, saferetry.ErrNotSent, nil},
		{"proxy asks for credentials on CONNECT (407)", func(t *testing.T) (http.RoundTripper, *retryablehttp.Request) {
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusProxyAuthRequired) }))
			t.Cleanup(proxy.Close)
			req, _ := retryablehttp.NewRequest(http.MethodPost, "https://origin.invalid/payments", []byte(`{}`))
			return proxyTo(t, proxy.URL), req
		}, saferetry.ErrNotSent, nil},
		{"TLS handshake refused", func(t *testing.T) (http.RoundTripper, *retryablehttp.Request) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.TLS = &tls.Config{MinVersion: tls.VersionTLS13}
			srv.StartTLS()
			t.Cleanup(srv.Close)
			req, _ := retryablehttp.NewRequest(http.MethodPost, srv.URL+"/payments", []byte(`{}`))
			return &http.Transport{TLSClientConfig: &tls.Config{MaxVersion: tls.VersionTLS12, InsecureSkipVerify: true}}, req
		}, saferetry.ErrNotSent, nil},
		{"proxy dial refused", func(t *testing.T) (http.RoundTripper, *retryablehttp.Request) {
			req, _ := retryablehttp.NewRequest(http.MethodPost, "https://origin.invalid/payments", []byte(`{}`))
			return proxyTo(t, "http://"+testkit.RefusedAddr(t)), req
		}, saferetry.ErrNotSent, nil},
		{"executed, then down", func(t *testing.T) (http.RoundTripper, *retryablehttp.Request) {
			url, _ := testkit.ExecuteThenGoDown(t)
			req, _ := retryablehttp.NewRequest(http.MethodPost, url+"/payments", []byte(`{}`))
			return &http.Transport{}, req
		}, saferetry.ErrOutcomeUnknown, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, req := tt.setup(t)
			if h, ok := base.(*http.Transport); ok {
				defer h.CloseIdleConnections()
			}
			c := retryablehttp.NewClient()
			c.Logger = nil
			c.RetryMax = 1
			c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, 2*time.Millisecond
			c.HTTPClient = &http.Client{Transport: base}
			Configure(c)
			resp, err := c.Do(req)
			if resp != nil {
				resp.Body.Close()
			}
			other := saferetry.ErrOutcomeUnknown
			if tt.want == saferetry.ErrOutcomeUnknown {
				other = saferetry.ErrNotSent
			}
			if !errors.Is(err, tt.want) || errors.Is(err, other) {
				t.Errorf("err = %v; want %v", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v; errors.Is does not find %v", err, tt.is)
			}
		})
	}
}

package saferetry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"weak"
)

// TestKeptKeyKeepsNoAttempt: a generated key kept after its operation
// (by a hook that records Attempt.Key, by a logger's handler that keeps
// its records, by a caller that reads it with KeyFromResponse to ask
// again later) is a small string: it must not keep the operation's
// attempts in memory, and with them the buffered body, once the response
// is dropped.
func TestKeptKeyKeepsNoAttempt(t *testing.T) {
	for _, via := range []string{"hook", "logger", "KeyFromResponse"} {
		t.Run(via, func(t *testing.T) {
			var attempt weak.Pointer[http.Request]
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				attempt = weak.Make(r)
				_, _ = io.Copy(io.Discard, r.Body)
				return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
			})
			var kept string
			var opts []Option
			switch via {
			case "hook":
				opts = append(opts, WithHook(func(a Attempt) { kept = a.Key }))
			case "logger":
				opts = append(opts, WithLogger(slog.New(&keyKeeper{key: &kept})))
			}
			tr := NewTransport(base, opts...)
			// A body without GetBody, which the Transport buffers.
			req, _ := http.NewRequest(http.MethodPost, "http://api.test/v1/debits", io.MultiReader(strings.NewReader(`{"amount":1500}`)))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if via == "KeyFromResponse" {
				kept, _ = KeyFromResponse(resp)
			}
			resp.Body.Close()
			resp = nil
			if kept == "" {
				t.Fatal("no key kept")
			}
			runtime.GC()
			if attempt.Value() != nil {
				t.Errorf("the key kept by the %s keeps the attempt's request (and its body) in memory", via)
			}
			runtime.KeepAlive(kept)
		})
	}
}

// keyKeeper is a slog handler that keeps the key of the last record, as a
// handler that keeps records (to send them later, or in a ring) does.
type keyKeeper struct{ key *string }

func (*keyKeeper) Enabled(context.Context, slog.Level) bool { return true }
func (h *keyKeeper) WithAttrs([]slog.Attr) slog.Handler     { return h }
func (h *keyKeeper) WithGroup(string) slog.Handler          { return h }

func (h *keyKeeper) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "key" {
			*h.key = a.Value.String()
		}
		return true
	})
	return nil
}

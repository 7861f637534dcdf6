package mockserver_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestHandlerRunTwiceKeepsFirstHeader: a handler middleware that runs the
// payment handler twice with one request, first into a writer of its own,
// keeps that writer's 201 header as the first run wrote it: the second
// run's answer (a payment of its own, unkeyed) does not change the
// values of the first one's Location.
func TestHandlerRunTwiceKeepsFirstHeader(t *testing.T) {
	type first struct {
		header   http.Header
		location string
	}
	firsts := make(chan first, 1)
	srv := mockserver.New(mockserver.WithUnkeyedPayments(), mockserver.WithHandlerMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				t.Errorf("reading the body: %v", err)
			}
			rec := httptest.NewRecorder()
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(rec, r)
			firsts <- first{rec.Header(), rec.Header().Get("Location")}
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
		})
	}))
	defer srv.Close()

	resp, body := mustSend(t, srv, http.MethodPost, "/payments", "twice-1", payBody)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status = %d, want 201; body %s", resp.StatusCode, body)
	}
	f := <-firsts
	second := resp.Header.Get("Location")
	if f.location == "" || second == "" || f.location == second {
		t.Fatalf("Locations %q and %q, want two payments' own", f.location, second)
	}
	if got := f.header.Get("Location"); got != f.location {
		t.Errorf("the first run's Location became %q after the second run, want %q", got, f.location)
	}
}

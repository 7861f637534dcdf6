package mockserver_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
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

// TestHandlerRunConcurrentlyKeepsEachHeader: a handler middleware that
// runs the payment handler twice at once with one request, each run into
// a writer of its own, gets two answers whose Locations are each run's
// own payment: the runs share no header values (-race).
func TestHandlerRunConcurrentlyKeepsEachHeader(t *testing.T) {
	srv := mockserver.New(mockserver.WithUnkeyedPayments(), mockserver.WithHandlerMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				t.Errorf("reading the body: %v", err)
			}
			recs := []*httptest.ResponseRecorder{httptest.NewRecorder(), httptest.NewRecorder()}
			var wg sync.WaitGroup
			for _, rec := range recs {
				run := r.Clone(r.Context())
				run.Body = io.NopCloser(bytes.NewReader(body))
				wg.Go(func() { next.ServeHTTP(rec, run) })
			}
			wg.Wait()
			a, b := recs[0].Header().Get("Location"), recs[1].Header().Get("Location")
			if a == "" || b == "" || a == b {
				t.Errorf("the runs' Locations are %q and %q, want two payments' own", a, b)
			}
			if a != "/payments/"+paymentID(t, recs[0].Body.Bytes()) || b != "/payments/"+paymentID(t, recs[1].Body.Bytes()) {
				t.Errorf("Locations %q and %q, for the bodies %s and %s", a, b, recs[0].Body, recs[1].Body)
			}
			w.WriteHeader(recs[0].Code)
		})
	}))
	defer srv.Close()

	if resp, body := mustSend(t, srv, http.MethodPost, "/payments", "concurrent-1", payBody); resp.StatusCode != http.StatusCreated {
		t.Fatalf("status = %d, want 201; body %s", resp.StatusCode, body)
	}
}

// paymentID is the id of the payment a 201's body describes.
func paymentID(t *testing.T, body []byte) string {
	var p struct{ ID string }
	if err := json.Unmarshal(body, &p); err != nil {
		t.Errorf("a 201's body %s: %v", body, err)
	}
	return p.ID
}

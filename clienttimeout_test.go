package saferetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testkit"
)

// TestClientTimeoutBoundsBodyBuffering: http.Client.Timeout (kept by
// WithHTTPClient) bounds the whole call, the buffering of a body without
// GetBody included, as it does when the Transport buffers it under
// net/http: a body whose producer stalls must not hold Do past it.
func TestClientTimeoutBoundsBodyBuffering(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(201))
	c := NewClient(WithBase(mockBase(rc)), WithHTTPClient(&http.Client{Timeout: 100 * time.Millisecond}))
	pr, pw := io.Pipe() // never written: a stalled producer
	defer pw.Close()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://api.test/v1/charges", pr)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, ErrNotSent) {
			t.Fatalf("Do: err = %v, want the timeout, not sent", err)
		}
		if len(rc.Seen()) != 0 {
			t.Fatalf("round trips %+v, want none", rc.Seen())
		}
	case <-time.After(3 * time.Second):
		pw.CloseWithError(errors.New("test over"))
		<-done
		t.Fatal("Do still buffering a stalled body 3 s into a 100 ms Client.Timeout")
	}
}

// TestDoneContextBufferingReadsItsOwnBody: Client.Do on a context already
// done, with a body without GetBody, gives up buffering it at once, while
// the read it started may not have begun: that read must take the body
// it was given, not read the field of the request Do goes on to write
// (the body it marks as failed), which is a data race. Run it with -race.
func TestDoneContextBufferingReadsItsOwnBody(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(201))
	c := NewClient(WithBase(mockBase(rc)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 100 {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/v1/charges", io.MultiReader(strings.NewReader(`{"amount":1500}`)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Do(req); !errors.Is(err, ErrNotSent) {
			t.Fatalf("Do: err = %v, want not sent", err)
		}
	}
	if len(rc.Seen()) != 0 {
		t.Fatalf("round trips %+v, want none", rc.Seen())
	}
}

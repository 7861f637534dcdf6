// Package exampletest runs an example server's run function in a test: it
// waits for the startup line, hands over the URL printed there, and checks
// the graceful shutdown at the end. Post sends the server a protected
// request.
package exampletest

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"
)

// startPatience bounds the wait for the startup line, shutdownPatience the
// wait for run to return after its context is cancelled.
const (
	startPatience    = 15 * time.Second
	shutdownPatience = 20 * time.Second
)

// urlWriter hands over the URL of the startup line.
type urlWriter struct {
	once sync.Once
	url  chan string
}

var urlRE = regexp.MustCompile(`listening on (http://\S+)`)

func (w *urlWriter) Write(p []byte) (int, error) {
	if m := urlRE.FindSubmatch(p); m != nil {
		w.once.Do(func() { w.url <- string(m[1]) })
	}
	return len(p), nil
}

// Start calls run in the background with a context of its own and an
// output that looks for the startup line ("listening on http://..."). It
// returns the URL of that line once printed, and fails t if run returns
// first. shutdown cancels the context and fails t unless run then returns
// nil and GET base+path is no longer answered. The context is cancelled at
// the end of the test in any case.
func Start(t *testing.T, run func(ctx context.Context, out io.Writer) error) (base string, shutdown func(path string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out := &urlWriter{url: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- run(ctx, out) }()
	select {
	case base = <-out.url:
	case err := <-done:
		t.Fatalf("run ended before listening: %v", err)
	case <-time.After(startPatience):
		t.Fatalf("no startup line after %v", startPatience)
	}
	shutdown = func(path string) {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run after shutdown = %v, want nil", err)
			}
		case <-time.After(shutdownPatience):
			t.Fatal("run did not return after the context was cancelled")
		}
		if _, err := http.Get(base + path); err == nil {
			t.Error("the server still answers after shutdown")
		}
	}
	return base, shutdown
}

// Package serve holds the graceful shutdown the example servers share, so
// that each example's main.go shows only what is particular to it.
package serve

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// shutdownTimeout bounds how long the requests in flight may take to be
// answered once the server is asked to stop.
const shutdownTimeout = 15 * time.Second

// UntilDone serves h on ln until ctx is done, then shuts down gracefully: no
// new connections, requests in flight are answered first (for up to 15 s).
// It returns nil after a clean shutdown, or the error that stopped serving
// or shutting down. It closes ln.
func UntilDone(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

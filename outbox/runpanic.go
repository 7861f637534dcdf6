package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
)

// PanicError is what Run panics with, on its caller's goroutine, when a
// function it called on a goroutine of its own panicked: the Publisher's
// Publish, or the relay's logger, say (see Run). Value is what that
// function panicked with, Stack the goroutine's stack when it did (as
// runtime/debug.Stack gives it). Its Error text holds both, so that a
// process that the panic ends shows where it came from; Unwrap returns
// Value when it is an error (a runtime.Error, say), for errors.As. It is
// a plain value, safe for concurrent use as long as nobody changes its
// fields.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("outbox: relay panicked: %v\n\n%s", e.Value, e.Stack)
}

func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// carried is a panic, or runtime.Goexit (pe nil), of a goroutine that a
// worker of Run started (see pipeline), which the worker raises again on
// its own goroutine (raise).
type carried struct{ pe *PanicError }

// recovered returns what a goroutine that did not return ended with: v,
// what recover gave (nil: runtime.Goexit), with the stack; to be called
// from the deferred function that called recover.
func recovered(v any) *carried {
	if v == nil {
		return &carried{}
	}
	if c, ok := v.(*carried); ok {
		return c
	}
	return &carried{&PanicError{Value: v, Stack: debug.Stack()}}
}

// raise panics with c, or calls runtime.Goexit; on a goroutine that a
// runGuard runs, the guard takes c as it is.
func (c *carried) raise() {
	if c.pe == nil {
		runtime.Goexit()
	}
	panic(c)
}

// runGuard ends a Run whose goroutine panicked or called runtime.Goexit:
// it stops the others (stop ends Run's context) and keeps the first such
// end, for Run to raise once every goroutine returned, rather than let it
// end the process, which nobody could prevent. The later ones are logged
// at level Error, as they go no further.
type runGuard struct {
	stop   context.CancelFunc
	logger *slog.Logger
	mu     sync.Mutex
	first  *carried
}

// run calls f, keeping its panic or runtime.Goexit, if any.
func (g *runGuard) run(f func()) {
	returned := false
	defer func() {
		if !returned {
			g.keep(recovered(recover()))
		}
	}()
	f()
	returned = true
}

func (g *runGuard) keep(c *carried) {
	g.stop()
	g.mu.Lock()
	first := g.first == nil
	if first {
		g.first = c
	}
	g.mu.Unlock()
	if !first {
		logLost(g.logger, c)
	}
}

// raise panics with the first panic kept, as a *PanicError, or calls
// runtime.Goexit for a first runtime.Goexit; it returns if none was kept.
func (g *runGuard) raise() {
	g.mu.Lock()
	c := g.first
	g.mu.Unlock()
	switch {
	case c == nil:
	case c.pe == nil:
		runtime.Goexit()
	default:
		panic(c.pe)
	}
}

// logLost logs c, a panic that another one's going up replaces, at level
// Error; a panic of the logger, which may be what panicked, is dropped.
func logLost(l *slog.Logger, c *carried) {
	defer func() { _ = recover() }()
	if c.pe == nil {
		l.Error("outbox: a relay goroutine called runtime.Goexit while a panic stopped the relay")
		return
	}
	l.Error("outbox: a relay goroutine panicked while another panic stopped the relay",
		"panic", fmt.Sprint(c.pe.Value), "stack", string(c.pe.Stack))
}

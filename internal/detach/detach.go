// Package detach runs a store call whose answer must not be lost when its
// caller's context ends: a claim that a statement or script acquired in
// the store while the caller gave up would otherwise keep the key held,
// its token lost with the answer, for the whole lease. The call runs to
// its end on a goroutine of its own, the caller returns when its context
// ends, and what the call did for a caller that left is undone.
package detach

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Call runs call on a goroutine of its own and returns its result, or,
// when ctx ends first, returns context.Cause(ctx) and handedOff true:
// call then runs on to its end, and left gets its result on call's
// goroutine, to undo what call did for the caller that left (a panic in
// left is dropped). ctx should be one that can end: a call under a
// context that never ends has no answer to lose, and runs on its caller's
// goroutine, without Call (and without its allocations).
//
// A panic in call is raised again on the caller's goroutine while it
// waits, as a *PanicError that carries the panic's value and call's stack,
// so that the caller's recover (net/http's, a middleware's) sees it as it
// would see a panic of a call made on its own goroutine, and the stack
// still shows where it happened; runtime.Goexit in call ends the caller's
// goroutine likewise. Once the caller left, left gets the *PanicError
// (or ErrGoexit) as call's error, with T's zero value, and the panic goes
// no further: no recover could reach it there, and it would end the
// process.
//
// g, when not nil, counts the call until it ended and left returned, so
// that g.Wait waits for it (a store's shutdown, before its client is
// closed).
func Call[T any](ctx context.Context, g *Group, call func() (T, error), left func(T, error)) (res T, handedOff bool, err error) {
	answer := make(chan result[T]) // unbuffered: the caller takes it, or left
	g.add()
	go run(ctx, g, answer, call, left)
	select {
	case a := <-answer:
		switch {
		case a.goexit:
			runtime.Goexit()
		case a.panicked != nil:
			panic(a.panicked)
		}
		return a.res, false, a.err
	case <-ctx.Done():
		return res, true, context.Cause(ctx)
	}
}

// result is what call came to.
type result[T any] struct {
	res      T
	err      error
	panicked *PanicError // call panicked: res and err are not call's
	goexit   bool        // call called runtime.Goexit
}

// run runs call and hands its result to Call's caller on answer, or to
// left once ctx ended and the caller left. It hands it over in a deferred
// function, which also runs when call panics or calls runtime.Goexit
// (whose unwinding no recover stops), and then counts the call done in g.
func run[T any](ctx context.Context, g *Group, answer chan<- result[T], call func() (T, error), left func(T, error)) {
	defer g.done() // last: after left
	var a result[T]
	returned := false
	defer func() {
		if !returned {
			if v := recover(); v != nil {
				a.panicked = newPanicError(v)
				a.err = a.panicked
			} else {
				a.goexit, a.err = true, ErrGoexit
			}
		}
		select {
		case answer <- a:
		case <-ctx.Done():
			defer func() { _ = recover() }() // see Call
			left(a.res, a.err)
		}
	}()
	a.res, a.err = call()
	returned = true
}

// ErrGoexit is the error that Call's left gets when call called
// runtime.Goexit (t.FailNow, in a test's hook) after the caller left.
var ErrGoexit = errors.New("detach: the call's goroutine exited (runtime.Goexit)")

// PanicError is a panic of Call's call, raised again on the caller's
// goroutine: the panic's value, and the stack of call's goroutine when it
// panicked. Errors.Is and errors.As reach the value when it is an error.
type PanicError struct {
	Value any
	Stack []byte
}

func newPanicError(v any) *PanicError {
	stack := debug.Stack()
	// The first line, "goroutine N [running]:", names a goroutine that
	// is gone by the time the caller raises the panic again.
	if i := bytes.IndexByte(stack, '\n'); i >= 0 {
		stack = stack[i+1:]
	}
	return &PanicError{Value: v, Stack: stack}
}

// Error gives the value, then the stack where it panicked.
func (p *PanicError) Error() string {
	return fmt.Sprintf("%v\n\npanicked on the goroutine of its call:\n%s", p.Value, p.Stack)
}

// Unwrap returns the value when it is an error, and nil otherwise.
func (p *PanicError) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

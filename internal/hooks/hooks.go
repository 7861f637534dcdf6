// Package hooks is the list of functions that both halves' WithHook
// options build (the root package's, called per attempt, and package
// idempotency's, called per event), so that both keep one rule: hooks add
// up, a nil one adds nothing, and every one runs, synchronously, in the
// order given.
package hooks

// List is the hooks given so far, in order; its zero value is empty and
// ready. A List is built while options are applied and only called after:
// calling it from several goroutines is safe, adding to it is not.
type List[E any] []func(E)

// Add appends f, unless f is nil.
func (l *List[E]) Add(f func(E)) {
	if f != nil {
		*l = append(*l, f)
	}
}

// Call calls every hook with a copy of *e, in order. It takes a pointer
// so that a caller with no hooks copies nothing. A hook that panics (or
// calls runtime.Goexit) does not keep the hooks after it from their call
// (instrumentation beside the caller's own hook still counts the event):
// each is called once, in order, while its panic goes on, which then
// reaches Call's caller as it was. Should a hook after it panic too, that
// later panic is dropped: the first tells what broke.
func (l List[E]) Call(e *E) {
	for i := range l {
		l.callAt(i, e)
	}
}

// callAt calls the hook at i with a copy of *e; should it panic, the hooks
// after it are called (see rest) before the panic goes on.
func (l List[E]) callAt(i int, e *E) {
	done := false
	defer func() {
		if !done {
			l[i+1:].rest(e)
		}
	}()
	l[i](*e)
	done = true
}

// rest calls every hook with a copy of *e, in order, while the panic of
// a hook before them goes on: a panic of theirs is recovered and dropped,
// so that the first one is what Call's caller recovers. The recover is
// in a call of rest's own, which the first panic does not unwind, so it
// never stops that one.
func (l List[E]) rest(e *E) {
	for _, f := range l {
		func() {
			defer func() { _ = recover() }()
			f(*e)
		}()
	}
}

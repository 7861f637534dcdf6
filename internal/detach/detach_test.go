package detach_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/detach"
)

var errBug = errors.New("bug")

func TestCallAnswers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, handedOff, err := detach.Call(ctx, nil, func() (int, error) { return 7, errBug },
		func(int, error) { t.Error("left called while the caller waited") })
	if res != 7 || handedOff || err != errBug {
		t.Fatalf("Call = %d, %v, %v; want call's 7, false, %v", res, handedOff, err, errBug)
	}
}

func TestCallLeavesAtTheContextsEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	got := make(chan int, 1)
	time.AfterFunc(10*time.Millisecond, cancel)
	_, handedOff, err := detach.Call(ctx, nil, func() (int, error) { <-release; return 7, nil },
		func(res int, err error) { got <- res })
	if !handedOff || !errors.Is(err, context.Canceled) {
		t.Fatalf("Call whose context ended = %v, %v; want true, the context's error", handedOff, err)
	}
	close(release)
	if res := <-got; res != 7 {
		t.Fatalf("left got %d; want call's 7", res)
	}
}

func TestCallRaisesAPanicOnTheCaller(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := func() (p any) {
		defer func() { p = recover() }()
		detach.Call(ctx, nil, func() (int, error) { panic(errBug) }, func(int, error) {})
		return nil
	}()
	pe, ok := p.(*detach.PanicError)
	if !ok || !errors.Is(pe, errBug) || !strings.Contains(pe.Error(), "TestCallRaisesAPanicOnTheCaller") {
		t.Fatalf("Call whose call panicked raised %v; want a *PanicError of %v with call's stack", p, errBug)
	}
}

func TestCallDropsAPanicOnceTheCallerLeft(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	release := make(chan struct{})
	got := make(chan error, 1)
	if _, handedOff, _ := detach.Call(ctx, nil, func() (int, error) { <-release; panic(errBug) },
		func(_ int, err error) { got <- err; panic("left's own") }); !handedOff {
		t.Fatal("Call whose context had ended did not hand off")
	}
	close(release)
	if err := <-got; !errors.Is(err, errBug) {
		t.Fatalf("left got %v; want the panic's %v", err, errBug)
	}
}

func TestCallGoexitEndsTheCaller(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned := make(chan bool, 1)
	go func() {
		ended := true
		defer func() { returned <- ended }()
		detach.Call(ctx, nil, func() (int, error) { runtime.Goexit(); return 0, nil }, func(int, error) {})
		ended = false
	}()
	if !<-returned {
		t.Fatal("Call whose call called runtime.Goexit returned; want the caller's goroutine ended too")
	}
}

func TestGroupWaitsForLeft(t *testing.T) {
	var g detach.Group
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	release, leaving := make(chan struct{}), make(chan struct{})
	left := false
	if _, handedOff, _ := detach.Call(ctx, &g, func() (int, error) { <-release; return 7, nil },
		func(int, error) { close(leaving); time.Sleep(10 * time.Millisecond); left = true }); !handedOff {
		t.Fatal("Call whose context had ended did not hand off")
	}
	short, stop := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer stop()
	if err := g.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while the call runs = %v; want its context's end", err)
	}
	close(release)
	<-leaving
	if err := g.Wait(context.Background()); err != nil || !left {
		t.Fatalf("Wait = %v, left returned %v; want nil once left returned", err, left)
	}
	if err := g.Wait(short); err != nil {
		t.Fatalf("Wait with no call running = %v; want nil at once", err)
	}
}

package hooks

import (
	"runtime"
	"slices"
	"testing"
)

// TestList: hooks add up, nil adds nothing, and each runs in the order
// given; the zero List calls nothing.
func TestList(t *testing.T) {
	var l List[int]
	one, two := 1, 2
	l.Call(&one) // the zero List: nothing to call, nothing to panic
	var got []string
	l.Add(func(e int) { got = append(got, "a"+string(rune('0'+e))) })
	l.Add(nil)
	l.Add(func(e int) { got = append(got, "b"+string(rune('0'+e))) })
	if len(l) != 2 {
		t.Fatalf("len = %d after adding two hooks and a nil one, want 2", len(l))
	}
	l.Call(&one)
	l.Call(&two)
	if want := []string{"a1", "b1", "a2", "b2"}; !slices.Equal(got, want) {
		t.Errorf("hooks ran as %v, want %v", got, want)
	}
}

// TestListPanicKeepsTheFirst: hooks after one that panics (or calls
// runtime.Goexit, as t.FailNow does) are called once each, in order, and
// should they panic too, the first hook's panic (or Goexit) is the one
// that goes on to Call's caller: a later hook's panic must not replace
// the one that tells what broke first.
func TestListPanicKeepsTheFirst(t *testing.T) {
	var got []string
	var l List[int]
	l.Add(func(int) { got = append(got, "a"); panic("a broke") })
	l.Add(func(int) { got = append(got, "b"); panic("b broke") })
	l.Add(func(int) { got = append(got, "c") })
	l.Add(func(int) { got = append(got, "d"); panic("d broke") })
	var p any
	func() {
		defer func() { p = recover() }()
		one := 1
		l.Call(&one)
	}()
	if p != "a broke" {
		t.Errorf("Call went on with panic %v, want the first hook's", p)
	}
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("hooks ran as %v, want %v", got, want)
	}

	// A Goexit first, a panic after: the goroutine still exits, rather
	// than panic with the later hook's value.
	var g List[int]
	g.Add(func(int) { runtime.Goexit() })
	g.Add(func(int) { panic("after the Goexit") })
	done := make(chan any, 1)
	go func() {
		exited := true
		defer func() {
			if exited {
				done <- recover()
			}
		}()
		one := 1
		g.Call(&one)
		exited = false
	}()
	if p := <-done; p != nil {
		t.Errorf("a Goexit followed by a hook's panic panicked with %v, want the Goexit to go on", p)
	}
}

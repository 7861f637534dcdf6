package hooks

import (
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

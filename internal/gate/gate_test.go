package gate

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestNewKeepsAQuarter(t *testing.T) {
	for _, tt := range []struct{ pool, want int }{
		{1, 1}, {2, 1}, {4, 3}, {8, 6}, {10, 8}, {20, 15}, {0, 1},
	} {
		if got := New(tt.pool).Cap(); got != tt.want {
			t.Errorf("New(%d).Cap() = %d, want %d", tt.pool, got, tt.want)
		}
	}
}

func TestEnterWaitsForAPlace(t *testing.T) {
	g := New(4) // 3 places
	ctx := context.Background()
	for range 3 {
		if err := g.Enter(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := g.InUse(); n != 3 {
		t.Fatalf("InUse on a full gate = %d, want 3", n)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := g.Enter(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Enter on a full gate = %v, want the context's error", err)
	}
	entered := make(chan error)
	go func() { entered <- g.Enter(ctx) }()
	g.Leave()
	select {
	case err := <-entered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Enter did not get the place given back")
	}
}

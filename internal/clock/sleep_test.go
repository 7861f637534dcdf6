package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	m := NewManual(time.Unix(0, 0))
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), m, time.Second) }()
	for m.Pending() == 0 {
		time.Sleep(time.Millisecond)
	}
	m.Advance(999 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Sleep returned %v before its time", err)
	default:
	}
	m.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v after its time, want nil", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- Sleep(ctx, m, time.Hour) }()
	for m.Pending() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v when ctx ends, want context.Canceled", err)
	}
	if m.Pending() != 0 {
		t.Errorf("%d timers left armed", m.Pending())
	}
	if err := Sleep(ctx, m, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(done ctx, 0) = %v", err)
	}
	if err := Sleep(context.Background(), m, -time.Second); err != nil {
		t.Errorf("Sleep(-1s) = %v", err)
	}
}

package mockserver

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestFaultsSetDuringRequests: faults injected while requests run are each
// taken by exactly one later request, and a request that starts after one
// is set takes it, however the requests before had found none pending.
func TestFaultsSetDuringRequests(t *testing.T) {
	s := New(WithBalance("EUR", 1<<62))
	defer s.Close()
	h := s.ts.Config.Handler
	post := func() int {
		return postPayment(h, uuid.NewString(), `{"amount":1,"currency":"EUR","recipient":"acct_1"}`).Code
	}

	// One after the other: each request after a fault is set takes it.
	for range 3 {
		if code := post(); code != http.StatusCreated {
			t.Fatalf("no fault pending: status %d", code)
		}
		s.FailNext(1, http.StatusTeapot)
		if code := post(); code != http.StatusTeapot {
			t.Fatalf("after FailNext: status %d, want %d", code, http.StatusTeapot)
		}
		s.DelayNext(1, 0)
		if code := post(); code != http.StatusCreated || len(s.Faults().Delays) != 0 {
			t.Fatalf("after DelayNext: status %d, delays pending %v", code, s.Faults().Delays)
		}
		s.SetLatency(time.Nanosecond)
		if f := s.Faults(); f.Latency != time.Nanosecond {
			t.Fatalf("latency %v after SetLatency", f.Latency)
		}
		s.SetLatency(0)
	}

	// Concurrently: the counts are exact.
	const workers, failures, delays = 4, 50, 50
	var stop atomic.Bool
	var teapots, created atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				switch code := post(); code {
				case http.StatusTeapot:
					teapots.Add(1)
				case http.StatusCreated:
					created.Add(1)
				default:
					t.Errorf("status %d", code)
					return
				}
			}
		}()
	}
	for range failures {
		s.FailNext(1, http.StatusTeapot)
		s.DelayNext(1, 0)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		f := s.Faults()
		if len(f.Fail) == 0 && len(f.Delays) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("faults still pending: %+v", f)
		}
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if n := teapots.Load(); n != failures {
		t.Errorf("%d requests answered the injected failure, want %d", n, failures)
	}
	if created.Load() < delays {
		t.Errorf("%d payments, fewer than the %d delays taken", created.Load(), delays)
	}
}

package mockserver_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/testenv"
	"github.com/saferetry/saferetry/mockserver"
)

// TestSlowBodyIsCutOff: a client that sends its headers, then dribbles its
// body a byte at a time, has its connection closed once the read timeout
// has passed.
func TestSlowBodyIsCutOff(t *testing.T) {
	const timeout = 200 * time.Millisecond
	srv := mockserver.New(mockserver.WithReadTimeout(timeout))
	defer srv.Close()
	start := time.Now()
	conn := testenv.RawRequest(t, srv.URL, "POST /_mock/fail HTTP/1.1\r\nHost: mock\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	defer conn.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	testenv.ClosedWithin(t, conn, conn, 5*time.Second)
	if took := time.Since(start); took < timeout-20*time.Millisecond || took > 3*time.Second {
		t.Errorf("connection closed after %v, want about %v", took, timeout)
	}
	if f := srv.Faults(); len(f.Fail) != 0 {
		t.Errorf("a body that never arrived injected %v", f.Fail)
	}
}

// TestStoppedBodyIsCutOff: a client that stops sending in the middle of
// its body has its connection closed after the read timeout.
func TestStoppedBodyIsCutOff(t *testing.T) {
	srv := mockserver.New(mockserver.WithReadTimeout(200 * time.Millisecond))
	defer srv.Close()
	conn := testenv.RawRequest(t, srv.URL, "POST /payments HTTP/1.1\r\nHost: mock\r\nIdempotency-Key: slow-1\r\n"+
		"Content-Type: application/json\r\nContent-Length: 60\r\n\r\n{\"amount\":")
	defer conn.Close()
	if took := testenv.ClosedWithin(t, conn, conn, 5*time.Second); took > 3*time.Second {
		t.Errorf("connection closed after %v", took)
	}
	if n := srv.Executions("slow-1"); n != 0 {
		t.Errorf("a payment whose body never arrived executed %d times", n)
	}
}

// TestLongHandlerOutlivesReadTimeout: the read timeout bounds how long a
// request takes to arrive, not how long the server works on it, so an
// injected delay or latency longer than it is still answered.
func TestLongHandlerOutlivesReadTimeout(t *testing.T) {
	srv := mockserver.New(mockserver.WithReadTimeout(100 * time.Millisecond))
	defer srv.Close()
	srv.DelayNext(1, 400*time.Millisecond)
	resp, b := mustSend(t, srv, "POST", "/payments", "long-1", payBody)
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("payment delayed past the read timeout: %d %s", resp.StatusCode, b)
	}
	srv.SetLatency(300 * time.Millisecond)
	if resp, b := mustSend(t, srv, "GET", "/balance", "", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /balance under latency past the read timeout: %d %s", resp.StatusCode, b)
	}
}

// TestInjectedWaitPastReadTimeoutStillReadsBody: an injected latency or
// delay longer than the read timeout does not cost a payment its body.
// Latency runs before anything reads the body, under the connection's read
// deadline: a body that is not already in the server's read buffer (this
// one, about 8 KB, does not fit in the 4 KiB that holds the headers) was
// read past the deadline and answered 400 ProblemBodyUnreadable, a final
// status, though the whole request had arrived well within the timeout.
func TestInjectedWaitPastReadTimeoutStillReadsBody(t *testing.T) {
	body := `{"amount":1250,"currency":"EUR","recipient":"` + strings.Repeat("a", 8000) + `"}`
	for _, tc := range []struct {
		name   string
		inject func(*mockserver.Server)
	}{
		{"latency", func(srv *mockserver.Server) { srv.SetLatency(300 * time.Millisecond) }},
		{"delay", func(srv *mockserver.Server) { srv.DelayNext(1, 300*time.Millisecond) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mockserver.New(mockserver.WithReadTimeout(100 * time.Millisecond))
			defer srv.Close()
			tc.inject(srv)
			resp, b := mustSend(t, srv, "POST", "/payments", "wait-body-1", body)
			if resp.StatusCode != http.StatusCreated {
				t.Errorf("POST /payments under an injected %s longer than the read timeout: %d %s, want 201", tc.name, resp.StatusCode, b)
			}
			if n := srv.Executions("wait-body-1"); n != 1 {
				t.Errorf("Executions = %d, want 1", n)
			}
		})
	}
}

// TestStoppedBodyUnderLatencyIsCutOff: the latency moves the read
// deadline on, it does not remove it: a client that stops sending its body
// still has its connection closed, a read timeout after the latency.
func TestStoppedBodyUnderLatencyIsCutOff(t *testing.T) {
	srv := mockserver.New(mockserver.WithReadTimeout(200 * time.Millisecond))
	defer srv.Close()
	srv.SetLatency(100 * time.Millisecond)
	conn := testenv.RawRequest(t, srv.URL, "POST /payments HTTP/1.1\r\nHost: mock\r\nIdempotency-Key: slow-2\r\n"+
		"Content-Type: application/json\r\nContent-Length: 60\r\n\r\n{\"amount\":")
	defer conn.Close()
	if took := testenv.ClosedWithin(t, conn, conn, 5*time.Second); took > 3*time.Second {
		t.Errorf("connection closed after %v", took)
	}
	if n := srv.Executions("slow-2"); n != 0 {
		t.Errorf("a payment whose body never arrived executed %d times", n)
	}
}

// TestIdleConnectionClosed: a keep-alive connection that waits longer than
// the idle timeout for its next request is closed by the server.
func TestIdleConnectionClosed(t *testing.T) {
	const timeout = 200 * time.Millisecond
	srv := mockserver.New(mockserver.WithIdleTimeout(timeout))
	defer srv.Close()
	sent := time.Now() // the server's idle wait starts after its answer, so after this
	conn := testenv.RawRequest(t, srv.URL, "GET /balance HTTP/1.1\r\nHost: mock\r\n\r\n")
	defer conn.Close()
	br := bufio.NewReader(conn)
	if resp := testenv.ReadResponse(t, br); resp.Close {
		t.Fatalf("first answer: close %v", resp.Close)
	}
	// The lower bound counts from the request, not from this read: on a
	// busy machine the answer may be read well after it was written, and
	// the idle wait already partly over.
	took := testenv.ClosedWithin(t, conn, br, 5*time.Second)
	if since := time.Since(sent); since < timeout-20*time.Millisecond || took > 3*time.Second {
		t.Errorf("idle connection closed %v after the request (%v after its answer was read), want about %v", since, took, timeout)
	}
}

// TestAdminAPIOff: with WithAdminAPI(false) every admin path is a 404
// problem and injects nothing, while the payments API and the Go methods
// work.
func TestAdminAPIOff(t *testing.T) {
	srv := mockserver.New(mockserver.WithAdminAPI(false))
	defer srv.Close()
	for _, rt := range documentedRoutes {
		if !strings.HasPrefix(rt.path, mockserver.AdminPrefix) {
			continue
		}
		method := strings.Split(rt.allow, ", ")[0]
		resp, b := mustSend(t, srv, method, rt.path, "", `{"latency_ms":5,"delay_ms":5}`)
		wantProblem(t, resp, b, http.StatusNotFound, mockserver.ProblemNotFound)
	}
	if f := srv.Faults(); len(f.Fail) != 0 || f.DropAfterCommit != 0 || len(f.Delays) != 0 || f.Latency != 0 {
		t.Errorf("admin requests injected faults with the admin API off: %+v", f)
	}
	if resp, b := mustSend(t, srv, "POST", "/payments", "off-1", payBody); resp.StatusCode != http.StatusCreated {
		t.Errorf("payment with the admin API off: %d %s", resp.StatusCode, b)
	}
	if srv.Executions("off-1") != 1 {
		t.Errorf("Executions = %d, want 1", srv.Executions("off-1"))
	}
}

// A request without a body, under a latency and then a delay longer than
// the read timeout: the server is already reading for the client's
// departure, so no deadline is moved under that read, which would cancel
// the request (a 503 "the payment did not run") though the client waits.
// The handler runs and answers its stored 400.
func TestInjectedWaitWithoutBodyKeepsTheRequest(t *testing.T) {
	srv := mockserver.New(mockserver.WithReadTimeout(100 * time.Millisecond))
	defer srv.Close()
	srv.SetLatency(10 * time.Millisecond)
	srv.DelayNext(1, 400*time.Millisecond)
	resp, b := mustSend(t, srv, "POST", "/payments", "bodyless-under-latency", "")
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bodyless POST under a latency and a delay past the read timeout: %d %s, want the handler's 400", resp.StatusCode, b)
	}
	if st := srv.Stats("bodyless-under-latency"); st.Executions != 1 {
		t.Errorf("executions %d, want 1 (history %+v)", st.Executions, st.History)
	}
}

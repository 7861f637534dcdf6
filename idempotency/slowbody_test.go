package idempotency_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/contract"
	"github.com/saferetry/saferetry/internal/testenv"
)

// TestSlowBodyIsNotAFinalBadRequest: a request whose body is still on its
// way when the server's read deadline (http.Server.ReadTimeout) passes is
// a valid request the server stopped waiting for, not a bad one. It was
// answered 400 ProblemBodyUnreadable, which the client treats as final
// (CONTRACT.md, client rule 3: "400 and 422 are final always"; the package
// table: "retry? no"), so the operation was given up though nothing ran
// and the same request, sent in time, succeeds. RFC 9110 has 408 Request
// Timeout for it, which the client retries and the server never stores.
func TestSlowBodyIsNotAFinalBadRequest(t *testing.T) {
	c := &counter{}
	srv := httptest.NewUnstartedServer(idempotency.Middleware(newStore(t))(c))
	srv.Config.ReadTimeout = 200 * time.Millisecond
	srv.Start()
	defer srv.Close()

	const body = `{"amount":1250,"currency":"EUR"}`
	conn := testenv.RawRequest(t, srv.URL, "POST /ops HTTP/1.1\r\nHost: x\r\nIdempotency-Key: slow-1\r\n"+
		"Content-Type: application/json\r\nContent-Length: 32\r\n\r\n"+body[:10])
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatalf("%d: body is not a problem: %v", resp.StatusCode, err)
	}
	if !contract.Retried(resp.StatusCode, resp.Header) {
		t.Errorf("a body the server stopped waiting for: %d %s, a final answer; want one the client retries (408)", resp.StatusCode, p.Type)
	}
	if p.Status != resp.StatusCode {
		t.Errorf("problem status %d, HTTP status %d", p.Status, resp.StatusCode)
	}
	if n := c.calls.Load(); n != 0 {
		t.Errorf("the handler ran %d times", n)
	}
}

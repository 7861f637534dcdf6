package testkit

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/internal/contract"
)

// The cut-answer server is a tiny idempotent server run in a child
// process (the test binary, re-executed) and killed with SIGKILL at a
// chosen point of its answer: the operation ran, and its answer does not
// reach the caller whole. It keeps its records in files, so that a new
// process on the same address replays them, as a real server with a shared
// store does after a crash. A package using it has a test that calls
// [ServeCutChild] and names it in [StartCutChild]'s run pattern.
const (
	envCutServe = "SAFERETRY_CUT_SERVE" // the mode; set in the child only
	envCutAddr  = "SAFERETRY_CUT_ADDR"
	envCutDir   = "SAFERETRY_CUT_DIR"
)

// The cut-answer server's modes: where the first execution's answer stops
// (or, for CutMidUpload, the first request with a body), the process then
// waiting for its SIGKILL. Every other answer, replays included, goes out
// whole. A POST to /first is answered 307 to /second, and executes nothing.
const (
	CutNone       = "none"       // answer everything whole
	CutBeforeHead = "beforehead" // the request read and executed, nothing answered
	CutAfterHead  = "afterhead"  // a 201's status line and header (Content-Length) sent, no body
	CutMidBody    = "midbody"    // half of a 201's body sent
	CutChunked    = "chunked"    // a chunked 201, cut before its last chunk
	CutMidUpload  = "midupload"  // 1 KiB of the request body read, nothing executed
	CutErrorBody  = "errorbody"  // a 422 problem+json answered, its body cut half-way; nothing executed
)

// CutProblem is the problem document of the CutErrorBody answer.
const CutProblem = `{"type":"https://example.com/problems/rejected","title":"Rejected","status":422,"detail":"the amount is over the limit of this account"}`

// ServeCutChild runs the cut-answer server, and never returns, when the
// process is a child started by [StartCutChild]; otherwise it returns at
// once.
func ServeCutChild() {
	mode := os.Getenv(envCutServe)
	if mode == "" {
		return
	}
	ln, err := net.Listen("tcp", os.Getenv(envCutAddr))
	if err != nil {
		fmt.Println("listen error:", err)
		os.Exit(2)
	}
	fmt.Println("listening", ln.Addr())
	s := &cutServer{mode: mode, dir: os.Getenv(envCutDir)}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(2)
		}
		go s.serve(c)
	}
}

type cutServer struct {
	mode string
	dir  string
}

// point tells the parent that the chosen point is reached and waits for
// the SIGKILL.
func (s *cutServer) point() {
	fmt.Println("point")
	select {}
}

func (s *cutServer) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if s.mode == CutMidUpload && req.ContentLength != 0 {
			_, _ = io.ReadFull(req.Body, make([]byte, 1024))
			s.point()
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		if req.URL.Path == "/first" {
			fmt.Fprintf(c, "HTTP/1.1 307 Temporary Redirect\r\nLocation: /second\r\nContent-Length: 0\r\n\r\n")
			continue
		}
		key := req.Header.Get("Idempotency-Key")
		sum := sha256.Sum256([]byte(key))
		rec := filepath.Join(s.dir, "rec-"+hex.EncodeToString(sum[:8]))
		if stored, err := os.ReadFile(rec); err == nil {
			fmt.Fprintf(c, "HTTP/1.1 201 Created\r\nIdempotent-Replayed: true\r\nContent-Length: %d\r\n\r\n%s", len(stored), stored)
			continue
		}
		if s.mode == CutErrorBody {
			fmt.Fprintf(c, "HTTP/1.1 422 Unprocessable Entity\r\nContent-Type: application/problem+json\r\nContent-Length: %d\r\n\r\n%s",
				len(CutProblem), CutProblem[:len(CutProblem)/2])
			s.point()
		}
		answer := CutAnswer(string(body), key)
		if err := os.WriteFile(rec, []byte(answer), 0o600); err != nil {
			return
		}
		f, err := os.OpenFile(filepath.Join(s.dir, "executions"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return
		}
		fmt.Fprintf(f, "%s %s\n", req.URL.Path, key)
		f.Close()
		head := fmt.Sprintf("HTTP/1.1 201 Created\r\nContent-Length: %d\r\n\r\n", len(answer))
		switch s.mode {
		case CutBeforeHead:
			s.point()
		case CutAfterHead:
			_, _ = io.WriteString(c, head)
			s.point()
		case CutMidBody:
			_, _ = io.WriteString(c, head+answer[:len(answer)/2])
			s.point()
		case CutChunked:
			fmt.Fprintf(c, "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(answer)/2, answer[:len(answer)/2])
			s.point()
		}
		_, _ = io.WriteString(c, head+answer)
	}
}

// CutAnswer is the body of the cut-answer server's 201 to a request with
// body and key.
func CutAnswer(body, key string) string {
	return fmt.Sprintf("paid %q under %q: %s", body, key, strings.Repeat("receipt ", 8))
}

// CutChild is a running cut-answer server. Its methods are for the
// test's goroutine.
type CutChild struct {
	t    testing.TB
	run  string
	cmd  *exec.Cmd
	Addr string // host:port
	dir  string
	done chan struct{} // closed when the process is gone
}

// StartCutChild starts a cut-answer server in mode on addr ("127.0.0.1:0"
// for a new port) keeping its records in dir: the test binary, running the
// tests that run matches, one of which calls [ServeCutChild]. When the
// server reaches its point, it is killed with SIGKILL. It is killed, if
// still running, when t ends.
func StartCutChild(t testing.TB, run, mode, addr, dir string) *CutChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1")
	cmd.Env = append(os.Environ(), envCutServe+"="+mode, envCutAddr+"="+addr, envCutDir+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &CutChild{t: t, run: run, cmd: cmd, dir: dir, done: make(chan struct{})}
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "point" {
				_ = cmd.Process.Kill() // SIGKILL
				continue
			}
			lines <- sc.Text()
		}
		close(lines)
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(c.Kill)
	select {
	case l := <-lines:
		a, ok := strings.CutPrefix(l, "listening ")
		if !ok {
			t.Fatalf("cut-answer server: %q", l)
		}
		c.Addr = a
	case <-time.After(20 * time.Second):
		t.Fatal("cut-answer server did not start")
	}
	return c
}

// Kill kills the server, if it still runs, and waits until it is gone.
func (c *CutChild) Kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// Killed waits until the server was killed at its point.
func (c *CutChild) Killed() {
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		c.t.Fatal("the cut-answer server was not killed")
	}
}

// Restart waits until the server was killed at its point and starts a
// new one on its address and records, answering everything whole.
func (c *CutChild) Restart() *CutChild {
	c.Killed()
	return StartCutChild(c.t, c.run, CutNone, c.Addr, c.dir)
}

// Executions returns the executions the servers recorded, as "path key".
func (c *CutChild) Executions() []string {
	b, err := os.ReadFile(filepath.Join(c.dir, "executions"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		c.t.Fatal(err)
	}
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// OneKey returns the one key of an operation's attempts, keys (one per
// attempt, in order), and fails t unless there are want of them, all
// the same and not empty.
func OneKey(t testing.TB, keys []string, want int) string {
	t.Helper()
	if len(keys) != want {
		t.Fatalf("attempts' keys %q, want %d attempts", keys, want)
	}
	for _, k := range keys {
		if k == "" || k != keys[0] {
			t.Fatalf("attempts' keys %q, want one key throughout", keys)
		}
	}
	return keys[0]
}

// WantReplayedOnce checks that resp, answered after attempts attempts
// whose keys were keys (one key throughout), is the replayed 201 of body
// under that key, whole, and that executions (the server's, see
// CutChild.Executions) hold one, at execution (a path; "" for any). It
// returns the key.
func WantReplayedOnce(t testing.TB, resp *http.Response, keys []string, attempts int, body string, executions func() []string, execution string) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	key := OneKey(t, keys, attempts)
	if err != nil || resp.StatusCode != http.StatusCreated || resp.Header.Get(contract.HeaderReplayed) != "true" || string(b) != CutAnswer(body, key) {
		t.Errorf("got %d %q (replayed %q, read error %v), want the replayed 201", resp.StatusCode, b, resp.Header.Get(contract.HeaderReplayed), err)
	}
	if ex := executions(); len(ex) != 1 || (execution != "" && ex[0] != execution+" "+key) {
		t.Errorf("executions %q, want 1 of %q", ex, execution)
	}
	return key
}

package conformance_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/internal/contract"
)

// oddServer are the ways newOddServer, a server that keeps the
// contract's core (one execution per (principal, key), another body
// refused with 422, stored replays marked), differs from the usual.
type oddServer struct {
	// firstCT and replayCT, when set, are the Content-Type of the first
	// answer and of a replay.
	firstCT, replayCT string
	// links: the first answer has two Link field lines; the replay holds
	// them in one, comma-joined (RFC 9110 5.3).
	links bool
	// joinWaiters: a request that arrives while its key is in progress
	// waits for the execution and gets its live answer (singleflight),
	// without the replay marker; a stored replay is marked.
	joinWaiters bool
	// refuse422 is a principal (Authorization) whose account cannot run
	// the operation: 422, whatever the key.
	refuse422 string
	// processing: a request that arrives while its key is in progress
	// gets 200 {"id":...,"status":"processing"} with the Location of the
	// resource being made, instead of 409 (the BROKEN part: that is not
	// the operation's answer, and a client takes it for final).
	processing bool
	// markedConflicts: the 409 for a key in progress carries
	// Idempotent-Replayed: true, as a layer that marks every answer for
	// a key it has seen does (the BROKEN part: a client takes a replayed
	// 409 for the operation's final answer and stops retrying).
	markedConflicts bool
}

func newOddServer(t *testing.T, o oddServer) *httptest.Server {
	t.Helper()
	type answer struct {
		body, loc string
	}
	type entry struct {
		body string
		id   string
		done chan struct{}
		ans  answer
	}
	var mu sync.Mutex
	keys := map[string]*entry{}
	n := 0
	ct := func(first bool) string {
		if !first && o.replayCT != "" {
			return o.replayCT
		}
		if o.firstCT != "" {
			return o.firstCT
		}
		return "application/json"
	}
	write := func(w http.ResponseWriter, a answer, first, marked bool) {
		w.Header().Set("Content-Type", ct(first))
		w.Header().Set("Location", a.loc)
		if o.links {
			if first {
				w.Header().Add("Link", `</a>; rel="a"`)
				w.Header().Add("Link", `</b>; rel="b"`)
			} else {
				w.Header().Set("Link", `</a>; rel="a", </b>; rel="b"`)
			}
		}
		if marked {
			w.Header().Set(contract.HeaderReplayed, "true")
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(a.body))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := string(readAll(r))
		who := r.Header.Get("Authorization")
		if r.Method == http.MethodGet {
			mu.Lock()
			c := n
			mu.Unlock()
			_, _ = w.Write([]byte(strconv.Itoa(c)))
			return
		}
		key, err := contract.ParseKeyFields(r.Header.Values(contract.HeaderKey))
		if err != nil || key == "" {
			contract.WriteProblem(w, http.StatusBadRequest, map[string]any{"type": "about:blank", "title": "bad key", "status": 400}, 0)
			return
		}
		if o.refuse422 != "" && who == o.refuse422 {
			contract.WriteProblem(w, http.StatusUnprocessableEntity, map[string]any{"type": "https://example.com/insufficient-funds", "title": "insufficient funds", "status": 422}, 0)
			return
		}
		sk := who + "\x00" + r.URL.Path + "\x00" + key // a key is bound to its principal and endpoint
		mu.Lock()
		if e, ok := keys[sk]; ok {
			mu.Unlock()
			if e.body != b {
				contract.WriteProblem(w, http.StatusUnprocessableEntity, map[string]any{"type": "about:blank", "title": "key reused", "status": 422}, 0)
				return
			}
			select {
			case <-e.done:
				write(w, e.ans, false, true)
			default:
				if o.processing {
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Location", "/items/item_"+e.id)
					_, _ = w.Write([]byte(`{"id":"item_` + e.id + `","status":"processing"}`))
					return
				}
				if !o.joinWaiters {
					if o.markedConflicts {
						w.Header().Set(contract.HeaderReplayed, "true")
					}
					w.Header().Set("Retry-After", "1")
					contract.WriteProblem(w, http.StatusConflict, map[string]any{"type": "about:blank", "title": "in progress", "status": 409}, 0)
					return
				}
				<-e.done
				write(w, e.ans, true, false) // the live answer, shared
			}
			return
		}
		n++
		id := strconv.Itoa(n)
		e := &entry{body: b, id: id, done: make(chan struct{})}
		keys[sk] = e
		mu.Unlock()
		time.Sleep(work)
		e.ans = answer{body: `{"id":"item_` + id + `"}`, loc: "/items/item_" + id}
		close(e.done)
		write(w, e.ans, true, false)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func oddServerRun(t *testing.T, o oddServer, c *conformance.Checker) conformance.Report {
	t.Helper()
	srv := newOddServer(t, o)
	if c == nil {
		c = &conformance.Checker{Timeout: 10 * time.Second}
	}
	if c.CountURL == "" {
		c.CountURL = srv.URL + "/count"
	}
	return runTarget(t, c, conformance.Target{URL: srv.URL + "/items", Body: []byte(body), KeyRequired: true})
}

func wantStatus(t *testing.T, rep conformance.Report, id string, want conformance.Status) {
	t.Helper()
	res, _ := rep.Result(id)
	if res.Status != want {
		t.Errorf("%s: %s (%s), want %s", id, res.Status, res.Verdict, want)
		logText(t, rep)
	}
}

// TestScopeIsolationPrincipalRefused422: keys are per principal,
// but principal b's account cannot run the operation and gets a
// validation 422 whatever the key. Nothing is shared; isolation is only
// not shown: WARN, as for any other refusal, not a MUST FAIL.
func TestScopeIsolationPrincipalRefused422(t *testing.T) {
	rep := oddServerRun(t, oddServer{refuse422: "Bearer bob"},
		&conformance.Checker{AuthA: principalA, AuthB: principalB, Timeout: 10 * time.Second})
	wantStatus(t, rep, conformance.CheckScopeIsolation, conformance.Warn)
}

// TestConcurrentOnceSingleflight: one execution; the requests that
// met it in progress waited and got its live answer (same Location, same
// id, same bytes) unmarked, the stored replays marked. One key ran once.
func TestConcurrentOnceSingleflight(t *testing.T) {
	rep := oddServerRun(t, oddServer{joinWaiters: true}, nil)
	wantStatus(t, rep, conformance.CheckCountOnce, conformance.Pass) // the server's own count: one execution
	wantStatus(t, rep, conformance.CheckConcurrentOnce, conformance.Pass)
}

// TestConcurrent409FailsAnInProgressSuccess: the requests that meet the
// key in progress get 200 "processing", naming the resource being made,
// instead of 409. The key ran once (count-once and concurrent-once pass),
// but those answers are neither 409 nor the operation's answer (201, its
// body): concurrent-409 fails, naming them.
func TestConcurrent409FailsAnInProgressSuccess(t *testing.T) {
	rep := oddServerRun(t, oddServer{processing: true}, nil)
	wantStatus(t, rep, conformance.CheckCountOnce, conformance.Pass)
	wantStatus(t, rep, conformance.CheckConcurrentOnce, conformance.Pass)
	wantStatus(t, rep, conformance.CheckConcurrent409, conformance.Fail)
	if res, _ := rep.Result(conformance.CheckConcurrent409); !strings.Contains(res.Verdict, "200") {
		t.Errorf("concurrent-409 verdict %q does not name the 200 answers", res.Verdict)
	}
}

// TestConcurrent409FailsAConflictMarkedAsReplay: the 409s for the key in
// progress are marked Idempotent-Replayed: true. A replayed 409 is the
// operation's own answer, final for a client (CONTRACT.md, client rule 3),
// which then never learns that the operation succeeded: those are not
// 409s in progress, and concurrent-409 fails, naming the marker.
func TestConcurrent409FailsAConflictMarkedAsReplay(t *testing.T) {
	rep := oddServerRun(t, oddServer{markedConflicts: true}, nil)
	wantStatus(t, rep, conformance.CheckConcurrentOnce, conformance.Pass)
	wantStatus(t, rep, conformance.CheckConcurrent409, conformance.Fail)
	if res, _ := rep.Result(conformance.CheckConcurrent409); !strings.Contains(res.Verdict, contract.HeaderReplayed) {
		t.Errorf("concurrent-409 verdict %q does not name %s", res.Verdict, contract.HeaderReplayed)
	}
}

// TestReplayHeadersLinkCombined: the replay holds the first
// answer's two Link field lines in one comma-joined line, which RFC 9110
// 5.3 makes the same field value.
func TestReplayHeadersLinkCombined(t *testing.T) {
	rep := oddServerRun(t, oddServer{links: true}, nil)
	wantStatus(t, rep, conformance.CheckReplayHeaders, conformance.Pass)
}

// TestReplayHeadersContentTypeSpelling: the replay's Content-Type is the
// same media type, its parameter spelled with another case and spacing
// (RFC 9110 8.3.1: type, subtype and charset are case-insensitive). Not a
// FAIL: a WARN, since a client that compares bytes sees a change.
func TestReplayHeadersContentTypeSpelling(t *testing.T) {
	rep := oddServerRun(t, oddServer{firstCT: "application/json; charset=utf-8", replayCT: "Application/JSON;charset=UTF-8"}, nil)
	wantStatus(t, rep, conformance.CheckReplayHeaders, conformance.Warn)
	rep = oddServerRun(t, oddServer{firstCT: "application/json; charset=utf-8", replayCT: "text/plain; charset=utf-8"}, nil)
	wantStatus(t, rep, conformance.CheckReplayHeaders, conformance.Fail)
}

// TestOddServerBaseline: the same server, as usual, passes every check.
func TestOddServerBaseline(t *testing.T) {
	rep := oddServerRun(t, oddServer{}, nil)
	for _, res := range rep.Results {
		if res.Status == conformance.Fail {
			t.Errorf("%s: FAIL (%s)", res.ID, res.Verdict)
		}
	}
	if t.Failed() {
		logText(t, rep)
	}
	_ = strings.TrimSpace
}

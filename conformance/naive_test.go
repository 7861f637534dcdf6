package conformance_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/saferetry/saferetry/internal/contract"
)

// naive is an idempotency layer written by hand, as many teams write one,
// around a handler that creates items: POST /items makes one, GET /items
// lists them. Its zero flaws keep the contract; each flaw breaks one rule.
type naive struct {
	flaws
	retention time.Duration // how long a completed key is kept
	mu        sync.Mutex
	entries   map[string]*naiveEntry
	items     []json.RawMessage
}

// flaws are the ways a naive layer breaks the contract.
type flaws struct {
	raceWindow       time.Duration // looks the key up, then inserts it this much later
	noFingerprint    bool          // another body with a used key replays
	lengthOnly       bool          // the fingerprint is the body's length: another body as long replays
	rerenderReplay   bool          // replays re-encode the answer (one member more)
	inProgressStatus int           // answers a key in progress with this status instead of 409
	noRetryAfter     bool          // 409 without Retry-After
	neverExpire      bool          // keys outlive their retention
	textErrors       bool          // errors as text/plain
	sharedScope      bool          // one key space for every principal
	reuseStatus      int           // answers a reused key with this status instead of 422
}

type naiveEntry struct {
	fingerprint string
	done        bool
	status      int
	body        []byte
	location    string
	at          time.Time // when it completed
}

// newNaive serves a naive layer with flaws f that keeps completed keys for
// retention.
func newNaive(f flaws, retention time.Duration) *httptest.Server {
	n := &naive{flaws: f, retention: retention, entries: make(map[string]*naiveEntry)}
	srv := httptest.NewServer(n)
	srv.Config.ErrorLog = nil
	return srv
}

func (n *naive) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/items":
		n.mu.Lock()
		list, _ := json.Marshal(append([]json.RawMessage{}, n.items...)) // [] when empty
		n.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(list)
	case r.Method == http.MethodPost && r.URL.Path == "/items":
		n.create(w, r)
	default:
		n.fail(w, http.StatusNotFound, "not-found", "no such route", 0)
	}
}

func (n *naive) create(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	vals := r.Header.Values(contract.HeaderKey)
	if len(vals) == 0 {
		n.fail(w, http.StatusBadRequest, "missing-key", "Idempotency-Key is required", 0)
		return
	}
	key, err := contract.ParseKeyFields(vals)
	if err != nil {
		n.fail(w, http.StatusBadRequest, "malformed-key", err.Error(), 0)
		return
	}
	if !n.sharedScope {
		key = r.Header.Get("Authorization") + "\x00" + key
	}
	fp := string(body)
	switch {
	case n.noFingerprint:
		fp = ""
	case n.lengthOnly:
		fp = strconv.Itoa(len(body))
	}

	n.mu.Lock()
	e, found := n.entries[key]
	if found && e.done && !n.neverExpire && time.Since(e.at) > n.retention {
		delete(n.entries, key)
		found = false
	}
	if !found {
		if n.raceWindow > 0 { // check, then insert: the classic race
			n.mu.Unlock()
			sleep(n.raceWindow)
			n.mu.Lock()
		}
		e = &naiveEntry{fingerprint: fp}
		n.entries[key] = e
		n.mu.Unlock()
		n.execute(w, e, body)
		return
	}
	snap := *e
	n.mu.Unlock()

	switch {
	case snap.fingerprint != fp && n.reuseStatus != 0:
		n.fail(w, n.reuseStatus, "key-reused", "the key was used with another body", 0)
	case snap.fingerprint != fp:
		n.fail(w, http.StatusUnprocessableEntity, "key-reused", "the key was used with another body", 0)
	case !snap.done && n.inProgressStatus == http.StatusOK:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"processing"}`)
	case !snap.done && n.inProgressStatus != 0:
		n.fail(w, n.inProgressStatus, "in-progress", "try again later", 0)
	case !snap.done && n.noRetryAfter:
		n.fail(w, http.StatusConflict, "in-progress", "try again later", 0)
	case !snap.done:
		n.fail(w, http.StatusConflict, "in-progress", "try again later", 1)
	default:
		h := w.Header()
		h.Set(contract.HeaderReplayed, "true")
		h.Set("Location", snap.location)
		h.Set("Content-Type", "application/json")
		w.WriteHeader(snap.status)
		out := snap.body
		if n.rerenderReplay {
			var m map[string]any
			_ = json.Unmarshal(out, &m)
			m["replayed"] = true
			out, _ = json.Marshal(m)
		}
		_, _ = w.Write(out)
	}
}

// execute runs the operation once and records its answer in e.
func (n *naive) execute(w http.ResponseWriter, e *naiveEntry, body []byte) {
	sleep(work)
	n.mu.Lock()
	id := "item_" + strconv.Itoa(len(n.items)+1)
	out, _ := json.Marshal(map[string]any{"id": id, "request": json.RawMessage(body)})
	n.items = append(n.items, out)
	e.done, e.status, e.body, e.location, e.at = true, http.StatusCreated, out, "/items/"+id, time.Now()
	n.mu.Unlock()
	w.Header().Set("Location", "/items/"+id)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(out)
}

func (n *naive) fail(w http.ResponseWriter, status int, kind, detail string, retryAfter int) {
	if n.textErrors {
		if retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		}
		http.Error(w, detail, status)
		return
	}
	contract.WriteProblem(w, status, map[string]any{"type": "https://example.com/problems/" + kind,
		"title": detail, "status": status}, retryAfter)
}

// sleep waits d: the handler's work, or a broken layer's race window.
func sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

func readAll(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}

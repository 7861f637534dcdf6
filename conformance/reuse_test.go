package conformance_test

import (
	"encoding/json"
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

// strictServer validates its body strictly (no unknown members) before
// its idempotency layer, which keeps no fingerprint: a used key replays
// whatever the body.
func strictServer(t *testing.T) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	answers := map[string][]byte{} // key -> first answer
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dec := json.NewDecoder(strings.NewReader(string(readAll(r))))
		dec.DisallowUnknownFields()
		var req struct {
			Amount    int    `json:"amount"`
			Currency  string `json:"currency"`
			Recipient string `json:"recipient"`
		}
		if err := dec.Decode(&req); err != nil {
			contract.WriteProblem(w, http.StatusBadRequest, map[string]any{"type": "about:blank", "title": "invalid body: " + err.Error(), "status": 400}, 0)
			return
		}
		key, err := contract.ParseKeyFields(r.Header.Values(contract.HeaderKey))
		if err != nil {
			contract.WriteProblem(w, http.StatusBadRequest, map[string]any{"type": "about:blank", "title": "bad key", "status": 400}, 0)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if a, ok := answers[key]; ok {
			w.Header().Set(contract.HeaderReplayed, "true")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(a)
			return
		}
		n++
		out := []byte(`{"id":"item_` + strconv.Itoa(n) + `","amount":` + strconv.Itoa(req.Amount) + `}`)
		answers[key] = out
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReuseRefusedByTheBodyAloneWarns: the derived other body has a member
// more, which a strict server refuses with 400 whatever the key.
// reuse-refused sends the other body with a fresh key too, sees the same
// 400, and warns that the refusal says nothing about the key instead of
// passing; given a valid other body, it finds that the key is not bound
// to its body.
func TestReuseRefusedByTheBodyAloneWarns(t *testing.T) {
	srv := strictServer(t)
	c := &conformance.Checker{Concurrency: 2, Timeout: 5 * time.Second, Profile: conformance.ProfileStripe}
	target := conformance.Target{URL: srv.URL + "/payments", Body: []byte(body)}

	rep := runTarget(t, c, target)
	res, _ := rep.Result(conformance.CheckReuseRefused)
	status, _ := rep.Result(conformance.CheckReuseStatus)
	if res.Status != conformance.Warn || !strings.Contains(res.Verdict, "other body") || status.Status != conformance.Skip {
		logText(t, rep)
		t.Fatalf("reuse-refused %s (%s), reuse-status %s; want WARN and SKIP: the 400 is the body's validation, which a fresh key gets too", res.Status, res.Verdict, status.Status)
	}

	target.OtherBody = []byte(`{"amount":99,"currency":"EUR","recipient":"bob"}`)
	rep = runTarget(t, c, target)
	if res, _ := rep.Result(conformance.CheckReuseRefused); res.Status != conformance.Fail {
		logText(t, rep)
		t.Fatalf("reuse-refused %s (%s) with a valid other body, against a server that keeps no fingerprint", res.Status, res.Verdict)
	}
}

// TestReuseRefusedCatchesLengthOnlyFingerprint: a server that binds a key
// to its body's length refuses any other body of another length, such as
// the one given here, and replays one as long as the first. reuse-refused
// sends a body of the same length too, derived from the first (a digit
// changed), and fails when it is replayed; reuse-status, which reads the
// refusal of the other body, still passes.
func TestReuseRefusedCatchesLengthOnlyFingerprint(t *testing.T) {
	srv := newNaive(flaws{lengthOnly: true}, longRetention)
	defer srv.Close()
	c := &conformance.Checker{Concurrency: 2, Timeout: 5 * time.Second}
	target := conformance.Target{URL: srv.URL + "/items", Body: []byte(body), KeyRequired: true,
		OtherBody: []byte(`{"amount":99,"currency":"USD","recipient":"bob"}`)}

	rep := runTarget(t, c, target)
	res, _ := rep.Result(conformance.CheckReuseRefused)
	if res.Status != conformance.Fail || rep.Passed() || !strings.Contains(res.Verdict, "same length") {
		logText(t, rep)
		t.Fatalf("reuse-refused %s (%s), want a FAIL naming the body of the same length that was replayed", res.Status, res.Verdict)
	}
	if st, _ := rep.Result(conformance.CheckReuseStatus); st.Status != conformance.Pass {
		t.Errorf("reuse-status %s (%s): the other body was refused with 422", st.Status, st.Verdict)
	}
}

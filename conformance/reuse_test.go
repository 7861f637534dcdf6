package conformance_test

import (
	"encoding/json"
	"errors"
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

// strictServer validates its body strictly (no unknown members, a
// currency it knows) before its idempotency layer. With fingerprint, that
// layer refuses a used key with another body (422); without, it keeps no
// fingerprint: a used key replays whatever the body.
func strictServer(t *testing.T, fingerprint bool) *httptest.Server {
	t.Helper()
	type rec struct{ body, answer []byte }
	var mu sync.Mutex
	answers := map[string]rec{} // key -> first body and answer
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := readAll(r)
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		var req struct {
			Amount    int    `json:"amount"`
			Currency  string `json:"currency"`
			Recipient string `json:"recipient"`
		}
		err := dec.Decode(&req)
		if err == nil && req.Currency != "EUR" && req.Currency != "USD" {
			err = errors.New("unknown currency " + strconv.Quote(req.Currency))
		}
		if err != nil {
			contract.WriteProblem(w, http.StatusBadRequest, map[string]any{"type": "about:blank", "title": "invalid body: " + err.Error(), "status": 400}, 0)
			return
		}
		key, err := contract.ParseKeyFields(r.Header.Values(contract.HeaderKey))
		if err != nil {
			contract.WriteProblem(w, http.StatusBadRequest, map[string]any{"type": "about:blank", "title": "bad key", "status": 400}, 0)
			return
		}
		key = r.URL.Path + "\x00" + key // a key is bound to its endpoint
		mu.Lock()
		defer mu.Unlock()
		if a, ok := answers[key]; ok {
			if fingerprint && string(a.body) != string(b) {
				contract.WriteProblem(w, http.StatusUnprocessableEntity, map[string]any{"type": "about:blank", "title": "key reused", "status": 422}, 0)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set(contract.HeaderReplayed, "true")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(a.answer)
			return
		}
		n++
		out := []byte(`{"id":"item_` + strconv.Itoa(n) + `","amount":` + strconv.Itoa(req.Amount) + `}`)
		answers[key] = rec{body: b, answer: out}
		w.Header().Set("Content-Type", "application/json")
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
// passing, when the body of the same length is refused too. Against a
// strict server that keeps no fingerprint, that body of the same length
// (a digit of the amount changed, still valid) is replayed: a FAIL, as it
// is when a valid other body is given.
func TestReuseRefusedByTheBodyAloneWarns(t *testing.T) {
	c := &conformance.Checker{Concurrency: 2, Timeout: 5 * time.Second, Profile: conformance.ProfileStripe}
	target := conformance.Target{URL: strictServer(t, true).URL + "/payments", Body: []byte(body)}

	rep := runTarget(t, c, target)
	res, _ := rep.Result(conformance.CheckReuseRefused)
	status, _ := rep.Result(conformance.CheckReuseStatus)
	if res.Status != conformance.Warn || !strings.Contains(res.Verdict, "other body") || status.Status != conformance.Skip {
		logText(t, rep)
		t.Fatalf("reuse-refused %s (%s), reuse-status %s; want WARN and SKIP: the 400 is the body's validation, which a fresh key gets too", res.Status, res.Verdict, status.Status)
	}

	target.URL = strictServer(t, false).URL + "/payments"
	rep = runTarget(t, c, target)
	res, _ = rep.Result(conformance.CheckReuseRefused)
	status, _ = rep.Result(conformance.CheckReuseStatus)
	if res.Status != conformance.Fail || !strings.Contains(res.Verdict, "same length") || status.Status != conformance.Skip {
		logText(t, rep)
		t.Fatalf("reuse-refused %s (%s), reuse-status %s, against a server that keeps no fingerprint; want FAIL (the body of the same length replayed) and SKIP", res.Status, res.Verdict, status.Status)
	}

	target.OtherBody = []byte(`{"amount":99,"currency":"EUR","recipient":"bob"}`)
	rep = runTarget(t, c, target)
	if res, _ := rep.Result(conformance.CheckReuseRefused); res.Status != conformance.Fail {
		logText(t, rep)
		t.Fatalf("reuse-refused %s (%s) with a valid other body, against a server that keeps no fingerprint", res.Status, res.Verdict)
	}
}

// TestReuseSameLengthRefusedAsInvalid: the body of the same length is
// derived from a string value here (the body has no number), which a
// strict server refuses as invalid (400, an unknown currency) before it
// looks at the key. That is a refusal like any: reuse-refused and
// reuse-status pass on the other body's 422.
func TestReuseSameLengthRefusedAsInvalid(t *testing.T) {
	c := &conformance.Checker{Concurrency: 2, Timeout: 5 * time.Second}
	rep := runTarget(t, c, conformance.Target{URL: strictServer(t, true).URL + "/payments",
		Body: []byte(`{"currency":"EUR","recipient":"alice"}`), OtherBody: []byte(`{"currency":"USD","recipient":"bob"}`)})
	res, _ := rep.Result(conformance.CheckReuseRefused)
	status, _ := rep.Result(conformance.CheckReuseStatus)
	if res.Status != conformance.Pass || !strings.Contains(res.Verdict, "body as long as the first, 400") || status.Status != conformance.Pass {
		logText(t, rep)
		t.Fatalf("reuse-refused %s (%s), reuse-status %s (%s); want PASS, the body of the same length refused with 400, and PASS", res.Status, res.Verdict, status.Status, status.Verdict)
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

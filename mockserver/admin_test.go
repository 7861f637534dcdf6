package mockserver_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/mockserver"
)

func TestAdminAPI(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()

	admin := func(method, path, body string) (*http.Response, []byte) {
		t.Helper()
		return mustSend(t, srv, method, path, "", body)
	}
	faults := func(b []byte) mockserver.Faults { return decodeJSON[mockserver.Faults](t, b) }

	// Injection answers the pending faults.
	resp, b := admin("POST", "/_mock/fail", `{"count":2,"status":500}`)
	if f := faults(b); resp.StatusCode != 200 || len(f.Fail) != 2 || f.Fail[0] != 500 {
		t.Fatalf("POST /_mock/fail: %d %s", resp.StatusCode, b)
	}
	_, b = admin("POST", "/_mock/fail", ``) // defaults: one 503
	if f := faults(b); len(f.Fail) != 3 || f.Fail[2] != 503 {
		t.Errorf("default fail: %s", b)
	}
	_, b = admin("POST", "/_mock/drop-after-commit", `{"count":1}`)
	if f := faults(b); f.DropAfterCommit != 1 {
		t.Errorf("drop: %s", b)
	}
	_, b = admin("POST", "/_mock/delay", `{"count":2,"delay_ms":5}`)
	if f := faults(b); len(f.DelaysMS) != 2 || f.DelaysMS[1] != 5 {
		t.Errorf("delay: %s", b)
	}
	_, b = admin("PUT", "/_mock/latency", `{"latency_ms":1}`)
	if f := faults(b); f.LatencyMS != 1 {
		t.Errorf("latency: %s", b)
	}
	if f := srv.Faults(); len(f.Fail) != 3 || f.DropAfterCommit != 1 || len(f.Delays) != 2 || f.Latency == 0 {
		t.Errorf("Go view of the HTTP-injected faults: %+v", f)
	}
	_, b = admin("GET", "/_mock/faults", "")
	if f := faults(b); len(f.Fail) != 3 {
		t.Errorf("GET /_mock/faults: %s", b)
	}
	_, b = admin("DELETE", "/_mock/faults", "")
	if f := faults(b); len(f.Fail) != 0 || f.DropAfterCommit != 0 || len(f.DelaysMS) != 0 || f.LatencyMS != 0 {
		t.Errorf("DELETE /_mock/faults: %s", b)
	}

	// Bad admin requests are 400 problems; unknown endpoints 404.
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/_mock/fail", `{"status":200}`},
		{"POST", "/_mock/fail", `{"count":-1}`},
		{"POST", "/_mock/fail", `not json`},
		{"POST", "/_mock/delay", `{"count":1}`},
		{"POST", "/_mock/delay", `{"delay_ms":-5}`},
		{"PUT", "/_mock/latency", `{}`},
	} {
		resp, b := admin(tc.method, tc.path, tc.body)
		wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemBadAdminRequest)
	}
	resp, b = admin("GET", "/_mock/nothing", "")
	wantProblem(t, resp, b, http.StatusNotFound, mockserver.ProblemNotFound)

	// Inspection over HTTP, including a key that needs escaping.
	key := "order/42 #1"
	admin("POST", "/_mock/fail", `{"count":1,"status":503}`)
	mustSend(t, srv, "POST", "/payments", key, payBody)
	mustSend(t, srv, "POST", "/payments", key, payBody)
	_, b = admin("GET", "/_mock/keys/"+url.PathEscape(key), "")
	st := decodeJSON[mockserver.KeyStats](t, b)
	if st.Key != key || st.Attempts != 2 || st.Executions != 1 || len(st.History) != 2 ||
		untimed(st.History[0]) != (mockserver.Attempt{Status: 503, Outcome: mockserver.OutcomeInjectedFailure}) {
		t.Errorf("GET /_mock/keys/{key} = %s", b)
	}
	_, b = admin("GET", "/_mock/keys/never-seen", "")
	if st := decodeJSON[mockserver.KeyStats](t, b); st.Key != "never-seen" || st.Attempts != 0 || st.History == nil {
		t.Errorf("unknown key: %s", b)
	}
	mustSend(t, srv, "POST", "/payments", "second", payBody)
	_, b = admin("GET", "/_mock/keys", "")
	all := decodeJSON[[]mockserver.KeyStats](t, b)
	if len(all) != 2 || all[0].Key != key || all[1].Key != "second" {
		t.Errorf("GET /_mock/keys = %s", b)
	}

	// Expiry and reset.
	_, b = admin("POST", "/_mock/expire-keys", "")
	if e := decodeJSON[struct{ Epoch int64 }](t, b); e.Epoch != 1 {
		t.Errorf("expire-keys: %s", b)
	}
	mustSend(t, srv, "POST", "/payments", key, payBody)
	if got := srv.Executions(key); got != 2 {
		t.Errorf("Executions after expire-keys = %d, want 2", got)
	}
	admin("POST", "/_mock/reset", "")
	if len(srv.Keys()) != 0 || len(srv.Payments()) != 0 || srv.Balance("EUR") != mockserver.DefaultBalance {
		t.Errorf("reset left state: %d keys, %d payments", len(srv.Keys()), len(srv.Payments()))
	}
}

func TestAdminIgnoresLatency(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	srv.SetLatency(10 * time.Second) // a request that waited would hit the client's timeout
	client := *srv.Client()
	client.Timeout = 2 * time.Second
	resp, err := client.Get(srv.URL + "/_mock/faults")
	if err != nil {
		t.Fatalf("admin request under latency: %v", err)
	}
	resp.Body.Close()
	srv.SetLatency(0)
}

// TestAdminRejectsOutOfRange checks the bounds of the admin API: a count
// large enough to exhaust memory, a delay that overflows time.Duration and a
// misspelt field are 400 problems, and nothing is queued.
func TestAdminRejectsOutOfRange(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/_mock/fail", `{"count":2000000000}`},
		{"POST", "/_mock/drop-after-commit", `{"count":2000000000}`},
		{"POST", "/_mock/delay", `{"count":2000000000,"delay_ms":1}`},
		{"POST", "/_mock/delay", `{"delay_ms":9223372036854775807}`},
		{"PUT", "/_mock/latency", `{"latency_ms":9223372036854775807}`},
		{"POST", "/_mock/fail", `{"status":0}`}, // given, so not the default 503
		{"POST", "/_mock/fail", `{"cont":2}`},
		{"POST", "/_mock/fail", `{"count":1} {"count":2}`},
	} {
		resp, b := mustSend(t, srv, tc.method, tc.path, "", tc.body)
		wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemBadAdminRequest)
	}
	if f := srv.Faults(); len(f.Fail) != 0 || f.DropAfterCommit != 0 || len(f.Delays) != 0 || f.Latency != 0 {
		t.Errorf("rejected requests queued faults: %+v", f)
	}
}

// TestAdminRefusesFieldsOfOtherEndpoints: each fault endpoint takes its
// own fields only. A field of another endpoint (a delay asked of
// /_mock/fail, a status of /_mock/drop-after-commit, a count of
// /_mock/latency) is as unknown as a misspelt one: a 400 problem, and
// nothing queued, not a 200 and a fault other than the one described.
func TestAdminRefusesFieldsOfOtherEndpoints(t *testing.T) {
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/_mock/fail", `{"count":1,"delay_ms":300}`},
		{"POST", "/_mock/fail", `{"latency_ms":50}`},
		{"POST", "/_mock/drop-after-commit", `{"count":1,"status":500}`},
		{"POST", "/_mock/drop-after-commit", `{"delay_ms":300}`},
		{"POST", "/_mock/delay", `{"delay_ms":300,"status":500}`},
		{"POST", "/_mock/delay", `{"delay_ms":300,"latency_ms":5}`},
		{"PUT", "/_mock/latency", `{"latency_ms":20,"count":3}`},
		{"PUT", "/_mock/latency", `{"latency_ms":20,"delay_ms":3}`},
	} {
		t.Run(tc.path+" "+tc.body, func(t *testing.T) {
			srv := mockserver.New()
			defer srv.Close()
			resp, b := mustSend(t, srv, tc.method, tc.path, "", tc.body)
			wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemBadAdminRequest)
			if f := srv.Faults(); len(f.Fail) != 0 || f.DropAfterCommit != 0 || len(f.Delays) != 0 || f.Latency != 0 {
				t.Errorf("refused request queued faults: %+v", f)
			}
		})
	}
}

// TestAdminOversizeBodyIsRefused: an admin body over 64 KiB is refused
// whole. It used to be cut at 64 KiB and decoded, so a body whose first
// 64 KiB were a valid request was accepted whatever followed, here
// malformed JSON, and injected two failures.
func TestAdminOversizeBodyIsRefused(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"malformed JSON after 64 KiB", `{"count":2}` + strings.Repeat(" ", 64<<10) + `{"count": oops`},
		{"valid JSON over 64 KiB", `{"count":2}` + strings.Repeat(" ", 64<<10)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mockserver.New()
			defer srv.Close()
			resp, b := mustSend(t, srv, "POST", "/_mock/fail", "", tc.body)
			wantProblem(t, resp, b, http.StatusBadRequest, mockserver.ProblemBadAdminRequest)
			if f := srv.Faults(); len(f.Fail) != 0 {
				t.Errorf("an oversize admin request injected failures: %v", f.Fail)
			}
		})
	}
	// A body of exactly 64 KiB is within the bound.
	srv := mockserver.New()
	defer srv.Close()
	body := `{"count":2}`
	body += strings.Repeat(" ", 64<<10-len(body))
	if resp, b := mustSend(t, srv, "POST", "/_mock/fail", "", body); resp.StatusCode != http.StatusOK || len(srv.Faults().Fail) != 2 {
		t.Errorf("a 64 KiB admin request: %d %.200s, faults %v", resp.StatusCode, b, srv.Faults().Fail)
	}
}

func TestFaultCountBounded(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for name, inject := range map[string]func(){
		"FailNext":            func() { srv.FailNext(mockserver.MaxFaultCount+1, 503) },
		"DropAfterCommitNext": func() { srv.DropAfterCommitNext(mockserver.MaxFaultCount + 1) },
		"DelayNext":           func() { srv.DelayNext(mockserver.MaxFaultCount+1, time.Millisecond) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s over MaxFaultCount did not panic", name)
				}
			}()
			inject()
		}()
	}
	// Pending faults add up to the bound, not beyond it.
	srv.FailNext(mockserver.MaxFaultCount, 503)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("FailNext past MaxFaultCount pending faults did not panic")
			}
		}()
		srv.FailNext(1, 503)
	}()
	if n := len(srv.Faults().Fail); n != mockserver.MaxFaultCount {
		t.Errorf("pending failures = %d, want %d", n, mockserver.MaxFaultCount)
	}
}

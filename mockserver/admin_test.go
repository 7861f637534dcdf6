package mockserver_test

import (
	"net/http"
	"net/url"
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
		st.History[0] != (mockserver.Attempt{Status: 503, Outcome: mockserver.OutcomeInjectedFailure}) {
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

package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/saferetry/saferetry/internal/testenv"
)

// scrape reads the Prometheus text at url's /metrics.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value adds up the samples of family name whose labels include want
// (name=value pairs): a counter's or gauge's value, a histogram's count.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	var sum float64
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// postWith sends a payment with key ("" for none) and body on a connection
// of its own, so that net/http cannot retry it on its own after a dropped
// answer; it returns the status, 0 when the connection was dropped. Like
// paymentInFlight's, the body goes without a Content-Type, so both have
// the same fingerprint.
func postWith(t *testing.T, url, key, body string) int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	req, _ := http.NewRequest("POST", url+"/payments", strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func admin(t *testing.T, url, path, body string) {
	t.Helper()
	resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST %s: %v %v", path, resp, err)
	}
	resp.Body.Close()
}

const pay = `{"amount":10,"currency":"EUR","recipient":"a"}`

// TestMetricsFlag: with -metrics, after injected faults (an answer dropped
// after commit, a slow execution met by a duplicate, a failure before the
// middleware) and a reused and a missing key, /metrics counts every outcome
// and retry under its Prometheus name.
func TestMetricsFlag(t *testing.T) {
	url, out, stop := start(t, "-metrics", "-namespace", "shop")
	defer stop()
	if !strings.Contains(out.String(), "metrics at /metrics") {
		t.Errorf("startup line %q does not mention the metrics", out.String())
	}

	admin(t, url, "/_mock/drop-after-commit", `{"count":1}`)
	if s := postWith(t, url, "m-drop", pay); s != 0 {
		t.Fatalf("the dropped payment got %d", s)
	}
	if s := postWith(t, url, "m-drop", pay); s != 201 { // the client's retry: a replay
		t.Fatalf("the retry after the drop: %d", s)
	}
	first := paymentInFlight(t, url, "m-busy")
	if s := postWith(t, url, "m-busy", pay); s != 409 {
		t.Fatalf("the duplicate of a running payment: %d, want 409", s)
	}
	if s := <-first; s != 201 {
		t.Fatalf("the slow payment: %d", s)
	}
	if s := postWith(t, url, "m-drop", `{"amount":99,"currency":"EUR","recipient":"a"}`); s != 422 {
		t.Fatalf("the reused key: %d", s)
	}
	if s := postWith(t, url, "", pay); s != 400 {
		t.Fatalf("no key: %d", s)
	}
	admin(t, url, "/_mock/fail", `{"count":1,"status":503}`)
	if s := postWith(t, url, "m-fail", pay); s != 503 {
		t.Fatalf("the injected failure: %d", s)
	}

	fams := scrape(t, url)
	const requests = "saferetry_server_requests_total"
	for _, c := range []struct {
		labels []string
		want   float64
	}{
		{[]string{"saferetry_outcome=new", "http_request_method=POST", "http_route=/payments", "http_response_status_code=201"}, 2},
		{[]string{"saferetry_outcome=replay", "http_response_status_code=201"}, 1},
		{[]string{"saferetry_outcome=in_progress", "http_response_status_code=409"}, 1},
		{[]string{"saferetry_outcome=mismatch", "http_response_status_code=422"}, 1},
		{[]string{"saferetry_outcome=missing_key", "http_response_status_code=400"}, 1},
		{nil, 6}, // the injected failure never reached the middleware
	} {
		if got := value(fams, requests, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", requests, c.labels, got, c.want)
		}
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"saferetry_server_retries_total", []string{"saferetry_scope=shop", "saferetry_outcome=replay"}, 1},
		{"saferetry_server_retries_total", []string{"saferetry_scope=shop", "saferetry_outcome=in_progress"}, 1},
		{"saferetry_server_handler_duration_seconds", []string{"http_route=/payments"}, 2},
		{"saferetry_server_request_duration_seconds", []string{"saferetry_outcome=new"}, 2},
		{"saferetry_server_store_duration_seconds", []string{"saferetry_store_operation=complete", "saferetry_store_name=memory"}, 2},
		{"saferetry_server_claims_active", nil, 0},
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, ok := fams["saferetry_server_claims_active"]; !ok {
		t.Error("no saferetry_server_claims_active")
	}
	if got := value(fams, "saferetry_server_store_duration_seconds", "saferetry_store_operation=claim"); got < 5 {
		t.Errorf("claims timed: %v, want at least the 5 requests with a key", got)
	}
}

// TestMetricsOffByDefault: without -metrics, /metrics is the 404 problem of
// any unknown path.
func TestMetricsOffByDefault(t *testing.T) {
	url, out, stop := start(t)
	defer stop()
	if strings.Contains(out.String(), "metrics") {
		t.Errorf("startup line %q mentions metrics", out.String())
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("GET /metrics without -metrics: %d %s, want a 404 problem", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestMetricsFlagTransactional: over PostgreSQL in transactional mode the
// instrumented store keeps the mode (the payment commits with its claim),
// and the transaction's calls are timed.
func TestMetricsFlagTransactional(t *testing.T) {
	u := testenv.PostgresURL(t)
	table := testenv.RandomName("cmdtest_")
	t.Cleanup(func() { dropTables(t, u, table) })
	url, out, stop := start(t, "-metrics", "-store", u, "-table", table)
	defer stop()
	if !strings.Contains(out.String(), "mode tx") {
		t.Fatalf("startup line %q: not transactional", out.String())
	}
	if s := postWith(t, url, "m-tx", pay); s != 201 {
		t.Fatalf("payment: %d", s)
	}
	if s := postWith(t, url, "m-tx", pay); s != 201 {
		t.Fatalf("replay: %d", s)
	}
	fams := scrape(t, url)
	for _, op := range []string{"begin_tx", "claim", "complete", "commit"} {
		if got := value(fams, "saferetry_server_store_duration_seconds", "saferetry_store_operation="+op, "saferetry_store_name=postgres"); got < 1 {
			t.Errorf("%s timed %v times, want at least 1", op, got)
		}
	}
	if got := value(fams, "saferetry_server_requests_total", "saferetry_outcome=replay"); got != 1 {
		t.Errorf("replays = %v, want 1", got)
	}
}

// dropTables drops the entries and ledger tables named after table.
func dropTables(t *testing.T, u, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dropLedger(t, u, table)
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Errorf("drop %s: %v", table, err)
		return
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS "`+table+`"`); err != nil {
		t.Errorf("drop %s: %v", table, err)
	}
}

package main

import (
	"encoding/json"
	"encoding/xml"
	"reflect"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/mockserver"
)

// TestOpenAPIWebhookSkipped: a webhook operation that declares
// Idempotency-Key is skipped, saying why (the API sends it, to a
// consumer: the checker cannot), on stderr, in -json (its webhook named)
// and in -junit, as the other skipped operations are; the paths'
// operations are checked. It was passed over without a word.
func TestOpenAPIWebhookSkipped(t *testing.T) {
	mock := mockserver.New()
	defer mock.Close()
	doc := `{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {
		"/payments": {"post": {"operationId": "createPayment",
			"parameters": [{"name": "Idempotency-Key", "in": "header", "required": true}],
			"requestBody": {"required": true, "content": {"application/json": {"example": ` + payBody + `}}}}}},
		"webhooks": {"paymentSucceeded": {"post": {"operationId": "onPaymentSucceeded",
			"parameters": [{"name": "Idempotency-Key", "in": "header"}]}}}}`
	code, stdout, stderr, raw := checkWithReports(t, doc, "-url", mock.URL, "-concurrency", "4")
	const line = `saferetry check: skipping onPaymentSucceeded (POST, webhook "paymentSucceeded"): webhook "paymentSucceeded": the API sends`
	if code != 0 || !strings.Contains(stderr, line) {
		t.Fatalf("exit %d, want 0 with the webhook skipped, saying %q\nstdout:\n%.600s\nstderr:\n%s", code, line, stdout, stderr)
	}
	var js struct {
		Targets []struct {
			Target string `json:"target"`
		} `json:"targets"`
		Skipped []map[string]string `json:"skipped"`
	}
	if err := json.Unmarshal([]byte(stdout), &js); err != nil {
		t.Fatalf("-json output does not parse: %v\n%s", err, stdout)
	}
	reason := ""
	if len(js.Skipped) == 1 {
		reason = js.Skipped[0]["reason"]
	}
	want := []map[string]string{{"target": "onPaymentSucceeded", "method": "POST", "webhook": "paymentSucceeded", "reason": reason}}
	if len(js.Targets) != 1 || js.Targets[0].Target != "createPayment" || !reflect.DeepEqual(js.Skipped, want) ||
		!strings.Contains(reason, "the API sends") {
		t.Errorf("-json: targets %+v, skipped %v; want createPayment checked, the webhook skipped: %v, saying the API sends it", js.Targets, js.Skipped, want)
	}
	var ju struct {
		Suites []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &ju); err != nil {
		t.Fatalf("-junit file does not parse: %v\n%s", err, raw)
	}
	found := false
	for _, s := range ju.Suites {
		if s.Name == "onPaymentSucceeded" {
			found = len(s.Cases) == 1 && s.Cases[0].Skipped != nil && strings.Contains(s.Cases[0].Skipped.Message, "the API sends")
		}
	}
	if !found {
		t.Errorf("-junit: want a suite onPaymentSucceeded of one test case skipped, saying the API sends it:\n%s", raw)
	}
}

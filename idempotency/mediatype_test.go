package idempotency_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestFingerprintMediaType checks that the media type a body is sent with
// is part of its fingerprint, as it decides how the application reads the
// same bytes (an API version, a JSON Merge Patch or a JSON Patch, another
// message type), while spellings of one media type are not.
func TestFingerprintMediaType(t *testing.T) {
	const amount = `{"amount":1500,"to":"acct_1"}`
	different := []struct{ name, ctA, ctB, body string }{
		{"+json version", "application/vnd.bank.v1+json", "application/vnd.bank.v2+json", amount},
		{"+json and application/json", "application/json", "application/vnd.bank.v2+json", amount},
		{"merge patch and JSON patch", "application/merge-patch+json", "application/json-patch+json", `[]`},
		{"merge patch and application/json", "application/json", "application/merge-patch+json", `{"email":null}`},
		{"JSON parameter", "application/json; version=1", "application/json; version=2", amount},
		{"JSON parameter and none", "application/json", "application/json; version=2", amount},
		{"bytes parameter", "application/x-protobuf; messageType=Payment", "application/x-protobuf; messageType=Refund", "\x08\x01"},
		{"bytes type", "application/vnd.bank.v1+xml", "application/vnd.bank.v2+xml", "<pay amount='1500'/>"},
		{"form and text", "application/x-www-form-urlencoded", "text/plain", "amount=1500"},
		{"bytes charset", "text/plain; charset=utf-8", "text/plain; charset=iso-8859-1", "caf\xe9"},
		{"unparsed type", "application/json;;", "application/json;;;", "{}"},
	}
	for _, tt := range different {
		a, b := fp("POST", "/pay", tt.ctA, tt.body), fp("POST", "/pay", tt.ctB, tt.body)
		if a == b {
			t.Errorf("%s: %q and %q share a fingerprint for %s", tt.name, tt.ctA, tt.ctB, tt.body)
		}
	}
	same := []struct{ name, ctA, ctB, body string }{
		{"JSON charset", "application/json", "application/json; charset=utf-8", amount},
		{"JSON charset case", "application/json", "application/json;charset=UTF-8", amount},
		{"type case", "application/json", "Application/JSON", amount},
		{"+json charset", "application/merge-patch+json", "application/merge-patch+json; charset=utf-8", amount},
		{"+json spelling", "application/vnd.bank.v2+json", "Application/Vnd.Bank.V2+JSON ; charset=\"utf-8\"", amount},
		{"parameter order", "application/x-protobuf; a=1; b=2", "application/x-protobuf; b=2; a=1", "\x08\x01"},
		{"parameter quoting", "text/plain; format=flowed", "text/plain; FORMAT=\"flowed\"", "x"},
		// Without a body the media type reads nothing.
		{"empty body", "", "application/vnd.bank.v2+json", ""},
	}
	for _, tt := range same {
		a, b := fp("POST", "/pay", tt.ctA, tt.body), fp("POST", "/pay", tt.ctB, tt.body)
		if a != b {
			t.Errorf("%s: %q and %q give different fingerprints for %s", tt.name, tt.ctA, tt.ctB, tt.body)
		}
	}
}

// TestKeyReusedNamesMediaType checks that the 422 answering a key sent again
// with the same body under another media type says that the media type is
// among what must match, so a client whose Content-Type changed between
// attempts learns why.
func TestKeyReusedNamesMediaType(t *testing.T) {
	h := idempotency.Middleware(newStore(t))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	do := func(ct string) *httptest.ResponseRecorder {
		return post(h, "k-type", `{"amount":1500}`, withHeader("Content-Type", ct))
	}
	if w := do("application/vnd.bank.v1+json"); w.Code != http.StatusCreated {
		t.Fatalf("first = %d %s", w.Code, w.Body)
	}
	p := wantProblem(t, do("application/vnd.bank.v2+json"), http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
	if !strings.Contains(p.Detail, "media type") {
		t.Errorf("detail %q does not name the media type", p.Detail)
	}
}

package mockserver_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/openapitest"
	"github.com/saferetry/saferetry/mockserver"
)

// sendTyped posts body to /payments with key and the Content-Type lines
// ct (none when ct is nil), and returns the request sent, the answer and
// its body.
func sendTyped(t *testing.T, srv *mockserver.Server, key string, ct []string, body string) (*http.Request, *http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", key)
	if ct != nil {
		req.Header["Content-Type"] = ct
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	req.Body = io.NopCloser(strings.NewReader(body))
	return req, resp, b
}

const problemUnsupportedMediaType = "https://pkg.go.dev/github.com/saferetry/saferetry/mockserver#ProblemUnsupportedMediaType"

// TestPaymentMediaTypeRefused: a payment body declared as anything but
// JSON in UTF-8 (a form, text, XML, another charset, a Content-Type that
// does not parse, two of them) is refused with 415, a problem whose detail
// names application/json, and an Accept header saying what is taken (RFC
// 9110, section 15.5.16), as documented in the OpenAPI description. The
// refusal comes before the key is claimed: nothing is paid or stored, so
// the same key with the body sent as JSON executes (201, not a replayed
// 415 nor a 422). JSON is taken as application/json in any case, with
// charset=utf-8 or other parameters, as a +json type, or without a
// Content-Type (RFC 9110, section 8.3, lets the server examine the data).
func TestPaymentMediaTypeRefused(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	doc := openapitest.Load(t, srv.OpenAPI())

	for i, ct := range [][]string{
		{"application/x-www-form-urlencoded"},
		{"text/plain"},
		{"text/plain; charset=utf-8"},
		{"application/xml"},
		{"multipart/form-data; boundary=x"},
		{"application/octet-stream"},
		{"application/json; charset=iso-8859-1"},
		{"application/json; charset=utf-16"},
		{"json"},
		{"application/json; charset"},
		{""},
		{"application/json", "text/plain"},
	} {
		key := "refused-" + strconv.Itoa(i)
		req, resp, b := sendTyped(t, srv, key, ct, payBody)
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Type %q: %d %s, want 415", ct, resp.StatusCode, b)
			continue
		}
		// The type URI is stable: clients match on it.
		wantProblem(t, resp, b, http.StatusUnsupportedMediaType, problemUnsupportedMediaType)
		if p := decodeJSON[struct{ Title, Detail string }](t, b); p.Title == "" || !strings.Contains(p.Detail, "application/json") {
			t.Errorf("Content-Type %q: problem %s, want a title and a detail naming application/json", ct, b)
		}
		if got := resp.Header.Get("Accept"); got != "application/json" {
			t.Errorf("Content-Type %q: Accept %q, want application/json", ct, got)
		}
		if resp.Header.Get(idempotency.HeaderReplayed) != "" {
			t.Errorf("Content-Type %q: a 415 with %s", ct, idempotency.HeaderReplayed)
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		for _, msg := range doc.Response(req, resp) {
			t.Errorf("Content-Type %q: the 415 is not as documented: %s", ct, msg)
		}

		_, resp, b = sendTyped(t, srv, key, []string{"application/json"}, payBody)
		if resp.StatusCode != http.StatusCreated || resp.Header.Get(idempotency.HeaderReplayed) != "" {
			t.Errorf("Content-Type %q refused, then the same key as application/json: %d (%s %q) %s; want a first 201",
				ct, resp.StatusCode, idempotency.HeaderReplayed, resp.Header.Get(idempotency.HeaderReplayed), b)
		}
	}
	if n := len(srv.Payments()); n != 12 {
		t.Errorf("%d payments, want the 12 sent as application/json", n)
	}

	for i, ct := range [][]string{
		nil,
		{"application/json"},
		{"application/json; charset=utf-8"},
		{"Application/JSON; Charset=UTF-8"},
		{`application/json;charset="utf-8"`},
		{"application/json; version=1"},
		{"application/vnd.bank.payment+json"},
	} {
		_, resp, b := sendTyped(t, srv, "taken-"+strconv.Itoa(i), ct, payBody)
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("Content-Type %q: %d %s, want 201", ct, resp.StatusCode, b)
		}
	}
}

// TestPaymentContentEncodingRefused: a payment body with a content coding
// (gzip) is refused with 415, a problem saying so, and Accept-Encoding:
// identity (RFC 9110, section 15.5.16), as documented, before the key is
// claimed: the same key with the body sent plain executes. It was read
// as JSON, still compressed, and refused with a 400 about its bytes,
// stored for the key.
func TestPaymentContentEncodingRefused(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	doc := openapitest.Load(t, srv.OpenAPI())
	gz := "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" // a gzip header: what matters is Content-Encoding
	for i, ce := range []string{"gzip", "br", "deflate, gzip"} {
		key := "coded-" + strconv.Itoa(i)
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", ce)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Encoding %s: %d %s, want 415", ce, resp.StatusCode, b)
			continue
		}
		wantProblem(t, resp, b, http.StatusUnsupportedMediaType, problemUnsupportedMediaType)
		if p := decodeJSON[struct{ Detail string }](t, b); !strings.Contains(p.Detail, "Content-Encoding") {
			t.Errorf("Content-Encoding %s: detail %q, want one naming Content-Encoding", ce, p.Detail)
		}
		if got := resp.Header.Get("Accept-Encoding"); got != "identity" {
			t.Errorf("Content-Encoding %s: Accept-Encoding %q, want identity", ce, got)
		}
		req.Body = io.NopCloser(strings.NewReader(gz))
		resp.Body = io.NopCloser(bytes.NewReader(b))
		for _, msg := range doc.Response(req, resp) {
			t.Errorf("Content-Encoding %s: the 415 is not as documented: %s", ce, msg)
		}
		if _, resp, b := sendTyped(t, srv, key, []string{"application/json"}, payBody); resp.StatusCode != http.StatusCreated {
			t.Errorf("Content-Encoding %s refused, then the same key sent plain: %d %s, want 201", ce, resp.StatusCode, b)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(payBody))
	req.Header.Set("Idempotency-Key", "identity")
	req.Header.Set("Content-Encoding", "identity")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("Content-Encoding identity: %d, want 201", resp.StatusCode)
	}
}

// sendHeaders posts body to /payments with the header lines h, and returns
// the answer and its body, ready to be read again.
func sendHeaders(t *testing.T, srv *mockserver.Server, h http.Header, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, b
}

// TestPaymentKeyJudgedBeforeMediaType: a payment without an
// Idempotency-Key, or with a malformed one, is answered the contract's 400
// (missing key, malformed key) whatever its Content-Type or
// Content-Encoding, as every other payment without a valid key is: the
// key's presence and syntax are judged first, then the media type. It was
// answered 415, which hid the contract's answer from a client that sends
// both mistakes.
func TestPaymentKeyJudgedBeforeMediaType(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for _, bad := range []http.Header{
		{"Content-Type": {"text/plain"}},
		{"Content-Type": {""}},
		{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}},
	} {
		for _, tc := range []struct {
			name string
			key  []string
			typ  string
		}{
			{"no key", nil, idempotency.ProblemMissingKey},
			{"empty key", []string{""}, idempotency.ProblemMalformedKey},
			{"two keys", []string{"a", "b"}, idempotency.ProblemMalformedKey},
			{"key with a comma", []string{"a,b"}, idempotency.ProblemMalformedKey},
		} {
			h := bad.Clone()
			if tc.key != nil {
				h["Idempotency-Key"] = tc.key
			}
			resp, b := sendHeaders(t, srv, h, payBody)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s, %v: %d %s, want 400", tc.name, bad, resp.StatusCode, b)
				continue
			}
			wantProblem(t, resp, b, http.StatusBadRequest, tc.typ)
		}
	}
	if n := len(srv.Payments()); n != 0 {
		t.Errorf("%d payments, want none", n)
	}
}

// TestPaymentMediaRangeRefused: a Content-Type that is a media range
// (application/*+json, copied from an Accept header or a server's list of
// what it reads) or a +json suffix without a name (application/+json, a
// vendor name left out of a template) names no media type (RFC 9110,
// section 8.3; RFC 6838, section 4.2.8), and is refused with 415 like any
// other Content-Type that is not JSON, before the key is claimed: a
// client that sends it has a bug that a server reading the type would
// meet. It was taken as a +json type and paid.
func TestPaymentMediaRangeRefused(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	for i, ct := range []string{"application/*+json", "application/vnd.*+json", "application/+json", "application/+json; charset=utf-8"} {
		key := "range-" + strconv.Itoa(i)
		_, resp, b := sendTyped(t, srv, key, []string{ct}, payBody)
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("Content-Type %q: %d %s, want 415", ct, resp.StatusCode, b)
			continue
		}
		wantProblem(t, resp, b, http.StatusUnsupportedMediaType, problemUnsupportedMediaType)
		if _, resp, b := sendTyped(t, srv, key, []string{"application/json"}, payBody); resp.StatusCode != http.StatusCreated || resp.Header.Get(idempotency.HeaderReplayed) != "" {
			t.Errorf("Content-Type %q refused, then the same key as application/json: %d %s; want a first 201", ct, resp.StatusCode, b)
		}
	}
	for i, ct := range []string{"application/merchant+json", "application/vnd.api+json", "application/merge-patch+json", "application/problem+json; charset=utf-8"} {
		if _, resp, b := sendTyped(t, srv, "suffix-"+strconv.Itoa(i), []string{ct}, payBody); resp.StatusCode != http.StatusCreated {
			t.Errorf("Content-Type %q: %d %s, want 201 (a +json type)", ct, resp.StatusCode, b)
		}
	}
}

package idempotency_test

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

func fp(method, target, contentType, body string) string {
	r := httptest.NewRequest(method, target, nil)
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return idempotency.Fingerprint(r, []byte(body))
}

func TestFingerprint(t *testing.T) {
	base := fp("POST", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`)
	if !strings.HasPrefix(base, "v1:") || len(base) != len("v1:")+64 {
		t.Fatalf("fingerprint %q: want v1: and 64 hex digits", base)
	}
	same := []struct{ name, method, target, ct, body string }{
		{"reordered members", "POST", "/pay?x=1&y=2", "application/json", `{"tags":["x","y"],"amount":10,"account":"a"}`},
		{"whitespace", "POST", "/pay?x=1&y=2", "application/json", "{ \"account\" : \"a\",\n \"amount\" : 10, \"tags\" : [ \"x\" , \"y\" ] }"},
		{"escapes", "POST", "/pay?x=1&y=2", "application/json", `{"\u0061ccount":"\u0061","amount":10,"tags":["x","y"]}`},
		{"reordered query", "POST", "/pay?y=2&x=1", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"json media type parameters", "POST", "/pay?x=1&y=2", "application/json; charset=utf-8", `{"amount":10,"account":"a","tags":["x","y"]}`},
		{"+json media type", "POST", "/pay?x=1&y=2", "application/merge-patch+json", `{"amount":10,"account":"a","tags":["x","y"]}`},
	}
	for _, tt := range same {
		if got := fp(tt.method, tt.target, tt.ct, tt.body); got != base {
			t.Errorf("%s: fingerprint differs", tt.name)
		}
	}
	different := []struct{ name, method, target, ct, body string }{
		{"changed value", "POST", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":11,"tags":["x","y"]}`},
		{"number spelling", "POST", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":10.0,"tags":["x","y"]}`},
		{"string vs number", "POST", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":"10","tags":["x","y"]}`},
		{"array order", "POST", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":10,"tags":["y","x"]}`},
		{"extra member", "POST", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":10,"tags":["x","y"],"n":null}`},
		{"method", "PATCH", "/pay?x=1&y=2", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"path", "POST", "/pay/2?x=1&y=2", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"escaped slash in path", "POST", "/pay%2F2?x=1&y=2", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"query value", "POST", "/pay?x=1&y=3", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"no query", "POST", "/pay", "application/json", `{"account":"a","amount":10,"tags":["x","y"]}`},
		{"not JSON: raw bytes", "POST", "/pay?x=1&y=2", "text/plain", `{"account":"a","amount":10,"tags":["x","y"]}`},
	}
	seen := map[string]string{base: "base"}
	for _, tt := range different {
		got := fp(tt.method, tt.target, tt.ct, tt.body)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s: same fingerprint as %s", tt.name, prev)
		}
		seen[got] = tt.name
	}
	// A body that is not JSON is taken byte for byte.
	if fp("POST", "/", "text/plain", "b=1 a=2") == fp("POST", "/", "text/plain", "a=2 b=1") {
		t.Errorf("raw bodies with different bytes share a fingerprint")
	}
	if fp("POST", "/", "application/json", "{not json") == fp("POST", "/", "application/json", "{not  json") {
		t.Errorf("invalid JSON bodies with different bytes share a fingerprint")
	}
	// The documented choices.
	if fp("POST", "/", "application/json", `{"s":"\u00e9\/"}`) != fp("POST", "/", "application/json", `{"s":"é/"}`) {
		t.Errorf("escaped and literal strings differ")
	}
	if fp("POST", "/", "application/json", `{"a":1,"a":2}`) == fp("POST", "/", "application/json", `{"a":2,"a":1}`) {
		t.Errorf("duplicate members in another order share a fingerprint")
	}
	if fp("POST", "/", "application/json", `{"n":1}`) == fp("POST", "/", "application/json", `{"n":1e0}`) {
		t.Errorf("1 and 1e0 share a fingerprint")
	}
	if fp("POST", "/?a=%41&b", "", "") != fp("POST", "/?b=&a=A", "", "") {
		t.Errorf("decoded-equal queries differ")
	}
	if fp("POST", "/", "application/json", `{}`) == fp("POST", "/", "text/plain", `{}`) {
		t.Errorf("the same bytes as JSON and as text share a fingerprint")
	}
	// Repeated query values keep their order.
	if fp("POST", "/?a=1&a=2", "", "") == fp("POST", "/?a=2&a=1", "", "") {
		t.Errorf("the order of repeated query values was lost")
	}
	// Field boundaries are unambiguous.
	if fp("POST", "/ab", "", "") == fp("POST", "/a", "", "b") {
		t.Errorf("path and body run together")
	}
}

func FuzzFingerprintJSONOrder(f *testing.F) {
	f.Add("a", "b", int64(1), "x")
	f.Fuzz(func(t *testing.T, k1, k2 string, n int64, s string) {
		if k1 == k2 {
			return
		}
		q := func(v string) string {
			b := strings.Builder{}
			b.WriteByte('"')
			for i := 0; i < len(v); i++ { // bytes, not runes: invalid UTF-8 stays distinct
				switch c := v[i]; {
				case c == '"' || c == '\\':
					b.WriteString(`\` + string(c))
				case c < 0x20:
					b.WriteString(`\u00` + string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15]))
				default:
					b.WriteByte(c)
				}
			}
			b.WriteByte('"')
			return b.String()
		}
		num := strconv.FormatInt(n, 10)
		a := "{" + q(k1) + ":" + num + "," + q(k2) + ":" + q(s) + "}"
		b := "{ " + q(k2) + " : " + q(s) + " , " + q(k1) + " : " + num + " }"
		if fp("POST", "/", "application/json", a) != fp("POST", "/", "application/json", b) {
			t.Fatalf("reordered members differ: %s vs %s", a, b)
		}
		c := "{" + q(k1) + ":" + strconv.FormatInt(n+1, 10) + "," + q(k2) + ":" + q(s) + "}"
		if fp("POST", "/", "application/json", a) == fp("POST", "/", "application/json", c) {
			t.Fatalf("changed value gives the same fingerprint: %s vs %s", a, c)
		}
	})
}

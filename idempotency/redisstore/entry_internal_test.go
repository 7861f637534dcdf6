package redisstore

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// FuzzCompletedEntry: a completed entry as Complete writes it (its head,
// then the claim's stored fingerprint, which the complete script appends)
// decodes to the outcome and the fingerprint it was made of, nil and
// empty header and body apart; and no string, however cut or altered,
// makes decodeString panic.
func FuzzCompletedEntry(f *testing.F) {
	f.Add(int64(1796479294551529), 201, false, true, "Content-Type", "application/json", true, []byte(`{"id":"pay_1"}`), "v1:"+strings.Repeat("ab", 32))
	f.Add(int64(1), 204, true, false, "", "", false, []byte(nil), "")
	f.Add(int64(2), -1, false, false, "", "", true, []byte{}, "fp")
	f.Add(int64(7), 200, false, true, "X-A", "\x00\xff,", true, []byte(",,9,"), "p01,2,3,")
	f.Fuzz(func(t *testing.T, tok int64, status int, oversize, withHeader bool, name, value string, withBody bool, body []byte, fp string) {
		if tok < 0 {
			return
		}
		resp := idempotency.Response{Status: status, Oversize: oversize}
		if withHeader {
			resp.Header = http.Header{}
			if name != "" {
				resp.Header[name] = []string{value}
			}
		}
		if withBody {
			resp.Body = append([]byte{}, body...)
		}
		v := string(completedHead(tok, resp)) + encodeFingerprint(fp)
		e, found, err := decodeString(v, "")
		if err != nil || !found {
			t.Fatalf("decodeString(%q) = %+v %v %v", v, e, found, err)
		}
		if e.State != idempotency.StateCompleted || e.Token != tok || e.Fingerprint != fp || e.Response == nil ||
			!reflect.DeepEqual(*e.Response, resp) {
			t.Fatalf("decodeString(%q) = %+v %+v, want token %d fingerprint %q and %+v", v, e, e.Response, tok, fp, resp)
		}
		for i := range len(v) {
			_, _, _ = decodeString(v[:i], "1")
			_, _, _ = decodeString(v[:i]+v[i+1:], "1")
		}
	})
}

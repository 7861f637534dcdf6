package contract

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWriteAndDecodeProblem(t *testing.T) {
	type doc struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail,omitempty"`
		Key    string `json:"idempotency_key,omitempty"`
	}
	for _, retryAfter := range []int{0, 3} {
		w := httptest.NewRecorder()
		WriteProblem(w, http.StatusConflict, doc{Type: "urn:x", Title: "In progress", Status: 409, Key: "k"}, retryAfter)
		h := w.Header()
		want := `{"type":"urn:x","title":"In progress","status":409,"idempotency_key":"k"}` + "\n"
		if w.Code != 409 || w.Body.String() != want || h.Get("Content-Type") != ContentTypeProblem ||
			h.Get("Cache-Control") != "no-store" || h.Get("Content-Length") != "74" {
			t.Fatalf("answer %d %v %q", w.Code, h, w.Body.String())
		}
		if got, wantRA := h.Get("Retry-After"), map[int]string{0: "", 3: "3"}[retryAfter]; got != wantRA {
			t.Errorf("Retry-After %q, want %q", got, wantRA)
		}
		var p doc
		if ok := DecodeProblem(h, w.Body.Bytes(), &p); !ok || p != (doc{Type: "urn:x", Title: "In progress", Status: 409, Key: "k"}) {
			t.Errorf("DecodeProblem = %+v, %v", p, ok)
		}
	}
	for _, tt := range []struct {
		ct, body string
		ok       bool
	}{
		{"application/problem+json; charset=utf-8", `{"type":"t"}`, true},
		{"application/json", `{"type":"t"}`, false},
		{"application/problem+json", `not json`, false},
		{"", `{"type":"t"}`, false},
	} {
		var p struct{ Type string }
		if ok := DecodeProblem(http.Header{"Content-Type": {tt.ct}}, []byte(tt.body), &p); ok != tt.ok {
			t.Errorf("DecodeProblem(%q, %q) ok = %v", tt.ct, tt.body, ok)
		}
	}
}

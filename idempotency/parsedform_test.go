package idempotency_test

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// TestFormParsedBeforeMiddlewareDecidesFingerprint: a handler in front of
// the Middleware that parses the form (a method-override or CSRF
// middleware calling r.FormValue) consumes the body, so the Middleware
// reads none, while the application reads the parsed form. Two payments
// with one key and different amounts must not share a fingerprint (the
// second would be told it was charged the first's amount), and a retry of
// the same form must still get the stored answer.
func TestFormParsedBeforeMiddlewareDecidesFingerprint(t *testing.T) {
	app := &counter{before: func(w http.ResponseWriter, r *http.Request) int {
		receipt := "none"
		if f, _, err := r.FormFile("receipt"); err == nil {
			b, _ := io.ReadAll(f)
			f.Close()
			receipt = string(b)
		}
		w.Header().Set("Charged", r.FormValue("amount")+" receipt "+receipt)
		return 0
	}}
	mw := idempotency.Middleware(newStore(t), idempotency.WithReplayHeaders("Charged"))(app)
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
			if err := r.ParseMultipartForm(1 << 20); err != nil {
				t.Errorf("ParseMultipartForm: %v", err)
			}
		}
		_ = r.FormValue("_method") // as a method-override handler does
		mw.ServeHTTP(w, r)
	})
	type form struct{ contentType, body string }
	urlencoded := func(amount string) form {
		return form{"application/x-www-form-urlencoded", "amount=" + amount}
	}
	multipartForm := func(amount, receipt string) form {
		var b bytes.Buffer
		mp := multipart.NewWriter(&b)
		_ = mp.SetBoundary("b0undary")
		_ = mp.WriteField("amount", amount)
		fw, _ := mp.CreateFormFile("receipt", "receipt.txt")
		_, _ = io.WriteString(fw, receipt)
		_ = mp.Close()
		return form{mp.FormDataContentType(), b.String()}
	}
	do := func(key string, f form) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(f.body))
		r.Header.Set("Content-Type", f.contentType)
		r.Header.Set(idempotency.HeaderIdempotencyKey, key)
		w := httptest.NewRecorder()
		outer.ServeHTTP(w, r)
		return w
	}
	tests := []struct {
		name                 string
		first, other         form
		wantFirst, wantOther string
	}{
		{"urlencoded amount", urlencoded("15000"), urlencoded("150"), "15000 receipt none", "150 receipt none"},
		{"multipart amount", multipartForm("15000", "r1"), multipartForm("150", "r1"), "15000 receipt r1", "150 receipt r1"},
		{"multipart file", multipartForm("150", "r1"), multipartForm("150", "r2"), "150 receipt r1", "150 receipt r2"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("form-%d", i)
			first := do(key, tt.first)
			if first.Code != http.StatusCreated || first.Header().Get("Charged") != tt.wantFirst {
				t.Fatalf("first = %d, Charged %q; want 201, %q", first.Code, first.Header().Get("Charged"), tt.wantFirst)
			}
			wantReplay(t, do(key, tt.first), first)
			w := do(key, tt.other)
			if w.Header().Get(idempotency.HeaderReplayed) == "true" {
				t.Fatalf("a request for %q got the replay of %q", tt.wantOther, w.Header().Get("Charged"))
			}
			wantProblem(t, w, http.StatusUnprocessableEntity, idempotency.ProblemKeyReused)
		})
	}
}

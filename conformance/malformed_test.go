package conformance_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry/conformance"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/contract"
)

// plantedServer serves the Middleware (keys optional) over a handler that
// makes a resource, behind wrap, which plants one flaw in front of it.
func plantedServer(t *testing.T, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	var n atomic.Int64
	app := idempotency.Middleware(memstore.New())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := "item_" + strings.Repeat("x", int(n.Add(1)))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/items/"+id)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"` + id + `"}`))
	}))
	srv := httptest.NewServer(wrap(app))
	t.Cleanup(srv.Close)
	return srv
}

// TestMalformedKeyVariants: CONTRACT.md refuses with 400 an empty key and
// a key given several times, as it does a broken sf-string. A layer that
// takes an empty value for no key runs the request unprotected; one that
// reads the first of several values runs it under a key the client did
// not mean. Each fails malformed-key; the Middleware alone passes.
func TestMalformedKeyVariants(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(http.Handler) http.Handler
		want conformance.Status
	}{
		{"the Middleware", func(h http.Handler) http.Handler { return h }, conformance.Pass},
		{"an empty key is no key", func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if vs := r.Header.Values(contract.HeaderKey); len(vs) == 1 && strings.TrimSpace(vs[0]) == "" {
					r.Header.Del(contract.HeaderKey)
				}
				h.ServeHTTP(w, r)
			})
		}, conformance.Fail},
		{"the first of several keys", func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if vs := r.Header.Values(contract.HeaderKey); len(vs) > 1 {
					r.Header.Set(contract.HeaderKey, vs[0])
				}
				h.ServeHTTP(w, r)
			})
		}, conformance.Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := plantedServer(t, tc.wrap)
			c := &conformance.Checker{Concurrency: 2, Timeout: 5 * time.Second}
			rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/items", Body: []byte(body)})
			if res, _ := rep.Result(conformance.CheckMalformedKey); res.Status != tc.want {
				logText(t, rep)
				t.Fatalf("malformed-key %s (%s), want %s", res.Status, res.Verdict, tc.want)
			}
		})
	}
}

// TestProblemJSONNeedsAnObject: an error answered application/problem+json
// with the body null (a nil document encoded) is no problem document: RFC
// 9457 makes one a JSON object. problem-json fails it.
func TestProblemJSONNeedsAnObject(t *testing.T) {
	srv := plantedServer(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			if rec.Code >= 400 {
				w.Header().Del("Content-Length")
				w.WriteHeader(rec.Code)
				_, _ = w.Write([]byte("null"))
				return
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		})
	})
	c := &conformance.Checker{Concurrency: 2, Timeout: 5 * time.Second}
	rep := runTarget(t, c, conformance.Target{URL: srv.URL + "/items", Body: []byte(body)})
	if res, _ := rep.Result(conformance.CheckProblemJSON); res.Status != conformance.Fail {
		logText(t, rep)
		t.Fatalf("problem-json %s (%s), want FAIL", res.Status, res.Verdict)
	}
}

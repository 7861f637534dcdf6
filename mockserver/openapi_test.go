package mockserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/openapitest"
	"github.com/saferetry/saferetry/mockserver"
)

// TestOpenAPIServed: GET /openapi.json answers the server's description, a
// valid OpenAPI 3.1 document whose x-idempotency follows the server's
// options.
func TestOpenAPIServed(t *testing.T) {
	srv := mockserver.New(mockserver.WithIdempotencyOptions(idempotency.WithTTL(time.Hour), idempotency.WithWaitForResult(250*time.Millisecond)))
	defer srv.Close()
	resp, body := mustSend(t, srv, "GET", mockserver.OpenAPIPath, "", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, srv.OpenAPI()) {
		t.Fatalf("GET %s: %d %q, %d bytes; want 200 application/json, the %d bytes of OpenAPI()",
			mockserver.OpenAPIPath, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), len(srv.OpenAPI()))
	}
	openapitest.Load(t, body)

	var doc struct {
		Paths map[string]map[string]struct {
			Policy *idempotency.OpenAPIPolicy `json:"x-idempotency"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if (op.Policy != nil) != (path == "/payments" && method == "post") {
				t.Errorf("%s %s: x-idempotency %v; only POST /payments takes a key", method, path, op.Policy)
			}
		}
	}
	p := doc.Paths["/payments"]["post"].Policy
	if p == nil || p.TTLSeconds != 3600 || p.Conflict.WaitSeconds != 0.25 || !p.KeyRequired ||
		strings.Join(p.Methods, ",") != "POST" || p.Scope.By != idempotency.ScopeGlobal {
		t.Errorf("POST /payments x-idempotency = %+v", p)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/openapi.json from mockserver.New().OpenAPI()")

// TestOpenAPIFile holds the description of a server with the default
// options, byte for byte, to testdata/openapi.json (indented there, for
// review; compacted, it must equal OpenAPI()). go test -run
// TestOpenAPIFile -update rewrites it.
func TestOpenAPIFile(t *testing.T) {
	srv := mockserver.New()
	defer srv.Close()
	doc := srv.OpenAPI()
	if *update {
		var b bytes.Buffer
		if err := json.Indent(&b, doc, "", "  "); err != nil {
			t.Fatal(err)
		}
		b.WriteByte('\n')
		if err := os.WriteFile("testdata/openapi.json", b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	file, err := os.ReadFile("testdata/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, file); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, want.Bytes()) {
		t.Fatal("testdata/openapi.json differs from OpenAPI(): run go test ./mockserver -run TestOpenAPIFile -update")
	}
}

// checked sends a request as send does, and checks it and its answer
// against doc: the answer must have status want and be as documented, and
// the request must be valid by the document exactly when validRequest.
func checked(t *testing.T, doc *openapitest.Doc, srv *mockserver.Server, method, path, key, body string, want int, validRequest bool) (*http.Response, []byte) {
	t.Helper()
	resp, b := mustSend(t, srv, method, path, key, body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s (key %q): %d, want %d: %s", method, path, key, resp.StatusCode, want, b)
	}
	req := resp.Request.Clone(context.Background())
	if req.GetBody != nil {
		req.Body, _ = req.GetBody()
	}
	if p := doc.Request(req); (len(p) == 0) != validRequest {
		t.Errorf("%s %s (key %q): request problems %v, want a valid request: %v", method, path, key, p, validRequest)
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	for _, p := range doc.Response(req, resp) {
		t.Errorf("%s %s (key %q): the %d answer is not as documented: %s", method, path, key, want, p)
	}
	return resp, b
}

// TestOpenAPILiveAnswers checks every kind of answer of the live server
// against its own description: first execution, replay, 409 in progress,
// 422 mismatch, 400 for a bad or missing key and for a bad body (and its
// replay), 402, 503, and the reads. A status, header or body the server
// sends that the document does not describe fails.
func TestOpenAPILiveAnswers(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	hold := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Idempotency-Key") == "slow" {
				close(started)
				<-release
			}
			next.ServeHTTP(w, r)
		})
	}
	srv := mockserver.New(mockserver.WithBalance("EUR", 10_000), mockserver.WithHandlerMiddleware(hold))
	defer srv.Close()
	doc := openapitest.Load(t, srv.OpenAPI())

	_, first := checked(t, doc, srv, "POST", "/payments", "k1", payBody, http.StatusCreated, true)
	resp, again := checked(t, doc, srv, "POST", "/payments", "k1", payBody, http.StatusCreated, true)
	if !bytes.Equal(first, again) || resp.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("replay %s (%s: %q), want %s", again, idempotency.HeaderReplayed, resp.Header.Get(idempotency.HeaderReplayed), first)
	}
	checked(t, doc, srv, "POST", "/payments", "k1", `{"amount":1,"currency":"EUR","recipient":"bob"}`, http.StatusUnprocessableEntity, true)
	checked(t, doc, srv, "POST", "/payments", `"unterminated`, payBody, http.StatusBadRequest, false)
	checked(t, doc, srv, "POST", "/payments", "", payBody, http.StatusBadRequest, false)
	checked(t, doc, srv, "POST", "/payments", "k2", `{"amount":0,"currency":"EUR","recipient":"a"}`, http.StatusBadRequest, false)
	resp, _ = checked(t, doc, srv, "POST", "/payments", "k2", `{"amount":0,"currency":"EUR","recipient":"a"}`, http.StatusBadRequest, false)
	if resp.Header.Get(idempotency.HeaderReplayed) != "true" {
		t.Error("the stored 400 is not replayed")
	}
	checked(t, doc, srv, "POST", "/payments", "k3", `{"amount":20000,"currency":"EUR","recipient":"a"}`, http.StatusPaymentRequired, true)
	srv.FailNext(1, http.StatusServiceUnavailable)
	checked(t, doc, srv, "POST", "/payments", "k4", payBody, http.StatusServiceUnavailable, true)

	done := make(chan error, 1)
	go func() {
		resp, b, err := send(t, srv, "POST", "/payments", "slow", payBody)
		if err == nil && resp.StatusCode != http.StatusCreated {
			err = errors.New("the held request: " + resp.Status + " " + string(b))
		}
		done <- err
	}()
	<-started
	resp, _ = checked(t, doc, srv, "POST", "/payments", "slow", payBody, http.StatusConflict, true)
	close(release)
	if err := <-done; err != nil {
		t.Error(err)
	}
	if resp.Header.Get("Retry-After") == "" {
		t.Error("409 without Retry-After")
	}

	p := decodeJSON[mockserver.Payment](t, first)
	checked(t, doc, srv, "GET", "/payments", "", "", http.StatusOK, true)
	checked(t, doc, srv, "GET", "/payments/"+p.ID, "", "", http.StatusOK, true)
	checked(t, doc, srv, "GET", "/payments/pay_0000000000000000", "", "", http.StatusNotFound, true)
	checked(t, doc, srv, "GET", "/balance", "", "", http.StatusOK, true)
	checked(t, doc, srv, "GET", "/balance?currency=eur", "", "", http.StatusOK, true)
	checked(t, doc, srv, "GET", "/balance?currency=E1", "", "", http.StatusBadRequest, false)
	checked(t, doc, srv, "GET", mockserver.OpenAPIPath, "", "", http.StatusOK, true)
}

// downLedger is a ledger that cannot be reached.
type downLedger struct{ mockserver.Ledger }

var errLedgerDown = errors.New("ledger down")

func (downLedger) Pay(context.Context, string, time.Duration, mockserver.Payment) (mockserver.Payment, bool, error) {
	return mockserver.Payment{}, false, errLedgerDown
}
func (downLedger) Payments(context.Context) ([]mockserver.Payment, error) { return nil, errLedgerDown }
func (downLedger) Payment(context.Context, string) (mockserver.Payment, bool, error) {
	return mockserver.Payment{}, false, errLedgerDown
}
func (downLedger) Balances(context.Context) (map[string]int64, error) { return nil, errLedgerDown }
func (downLedger) Balance(context.Context, string) (int64, error)     { return 0, errLedgerDown }

// TestOpenAPILedgerDown checks the 503 answers of a server whose ledger
// is down against its description.
func TestOpenAPILedgerDown(t *testing.T) {
	srv := mockserver.New(mockserver.WithLedger(downLedger{}))
	defer srv.Close()
	doc := openapitest.Load(t, srv.OpenAPI())
	checked(t, doc, srv, "POST", "/payments", "k1", payBody, http.StatusServiceUnavailable, true)
	for _, path := range []string{"/payments", "/payments/pay_0000000000000000", "/balance", "/balance?currency=EUR"} {
		checked(t, doc, srv, "GET", path, "", "", http.StatusServiceUnavailable, true)
	}
}

package idempotency_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/contract"
	"github.com/saferetry/saferetry/internal/openapitest"
)

var update = flag.Bool("update", false, "rewrite openapi.json from idempotency.OpenAPI()")

// TestOpenAPIFragmentValid validates the fragment, alone, under every
// policy the options can give, with a real OpenAPI 3.1 validator.
func TestOpenAPIFragmentValid(t *testing.T) {
	scoped := idempotency.WithScope(func(*http.Request) (string, error) { return "", nil })
	for name, opts := range map[string][]idempotency.Option{
		"defaults":     nil,
		"key required": {idempotency.WithKeyRequired(true)},
		"scoped":       {scoped},
		"every option": {idempotency.WithKeyRequired(true), scoped, idempotency.WithFailOpen(true), idempotency.WithTTL(90 * time.Minute),
			idempotency.WithWaitForResult(1500 * time.Millisecond), idempotency.WithMethods(http.MethodPut, http.MethodPost),
			idempotency.WithReplayHeaders("X-Request-Cost"), idempotency.WithMaxRequestBody(10), idempotency.WithMaxResponseBody(20)},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(idempotency.OpenAPI(opts...))
			if err != nil {
				t.Fatal(err)
			}
			openapitest.Load(t, b)
		})
	}
}

// TestOpenAPIFile holds openapi.json to the fragment of the default
// options; go test -run TestOpenAPIFile -update rewrites it.
func TestOpenAPIFile(t *testing.T) {
	want, err := json.MarshalIndent(idempotency.OpenAPI(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("openapi.json differs from idempotency.OpenAPI(): run go test ./idempotency -run TestOpenAPIFile -update")
	}
}

// TestOpenAPIPolicy checks that x-idempotency says what the options set,
// and that its stored statuses are the contract's.
func TestOpenAPIPolicy(t *testing.T) {
	p := idempotency.OpenAPI().Policy
	if p.Version != 1 || p.Header != "Idempotency-Key" || p.KeyRequired || p.TTLSeconds != 86400 || p.MaxKeyLength != 255 ||
		strings.Join(p.Methods, ",") != "PATCH,POST" || p.Scope.By != idempotency.ScopeGlobal || p.Scope.PerRoute ||
		p.StoreFailure != idempotency.StoreFailClosed || p.Conflict.WaitSeconds != 0 || p.Conflict.InProgressStatus != 409 ||
		p.Conflict.MismatchStatus != 422 || !p.Conflict.RetryAfter || p.Fingerprint.Version != "v1" ||
		p.Fingerprint.MaxBodyBytes != idempotency.DefaultMaxRequestBody || p.Replay.MaxBodyBytes != idempotency.DefaultMaxResponseBody ||
		strings.Join(p.Replay.Headers, ",") != "Content-Location,Content-Type,Etag,Last-Modified,Link,Location" {
		t.Errorf("default policy %+v", p)
	}
	p = idempotency.OpenAPI(idempotency.WithKeyRequired(true), idempotency.WithTTL(90*time.Second),
		idempotency.WithWaitForResult(1500*time.Millisecond), idempotency.WithFailOpen(true), idempotency.WithMethods(http.MethodPut),
		idempotency.WithScope(func(*http.Request) (string, error) { return "", nil }), idempotency.WithReplayHeaders("x-cost"),
		idempotency.WithMaxRequestBody(10), idempotency.WithMaxResponseBody(20)).Policy
	if !p.KeyRequired || p.TTLSeconds != 90 || p.Conflict.WaitSeconds != 1.5 || p.StoreFailure != idempotency.StoreFailOpen ||
		strings.Join(p.Methods, ",") != "PUT" || p.Scope.By != idempotency.ScopeCustom || p.Fingerprint.MaxBodyBytes != 10 ||
		p.Replay.MaxBodyBytes != 20 || !strings.Contains(strings.Join(p.Replay.Headers, ","), "X-Cost") {
		t.Errorf("configured policy %+v", p)
	}
	for s := 100; s <= 599; s++ {
		stored := s < p.Replay.StoredBelow
		for _, n := range p.Replay.NotStored {
			stored = stored && s != n
		}
		if stored != contract.Stored(s) {
			t.Errorf("status %d: x-idempotency says stored %v, the contract %v", s, stored, contract.Stored(s))
		}
	}
}

// opsDocument is an API of one protected operation, POST /ops, answered
// by the counter handler, described with the fragment as its
// documentation says.
func opsDocument(t *testing.T, f *idempotency.OpenAPIFragment) *openapitest.Doc {
	t.Helper()
	type obj = map[string]any
	op := f.Operation()
	responses := obj{"201": obj{
		"description": "The operation ran (or is replayed).",
		"headers":     obj{"Location": obj{"schema": obj{"type": "string"}}, idempotency.HeaderReplayed: f.ReplayedHeader()},
		"content": obj{"application/json": obj{"schema": obj{
			"type": "object", "required": []string{"execution", "request"}, "additionalProperties": false,
			"properties": obj{"execution": obj{"type": "integer", "minimum": 1}, "request": obj{"type": "string"}},
		}}},
	}}
	for status, r := range op.Responses {
		responses[status] = r
	}
	b, err := json.Marshal(obj{
		"openapi": idempotency.OpenAPIVersion,
		"info":    obj{"title": "ops", "version": "1"},
		"paths": obj{"/ops": obj{"post": obj{
			"parameters":    op.Parameters,
			"requestBody":   obj{"content": obj{"application/json": obj{"schema": obj{"type": "object"}}}},
			"responses":     responses,
			"x-idempotency": op.Policy,
		}}},
		"components": f.Components(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return openapitest.Load(t, b)
}

// checkAnswer fails t unless w, the answer to a POST /ops with key and
// body, has status want and is valid by doc.
func checkAnswer(t *testing.T, doc *openapitest.Doc, w *httptest.ResponseRecorder, want int, key, body string) {
	t.Helper()
	if w.Code != want {
		t.Fatalf("status %d, want %d: %s", w.Code, want, w.Body)
	}
	r := httptest.NewRequest(http.MethodPost, "/ops", strings.NewReader(body))
	if key != "" {
		r.Header.Set(idempotency.HeaderIdempotencyKey, key)
	}
	for _, p := range doc.Response(r, w.Result()) {
		t.Errorf("%d answer not as documented: %s", want, p)
	}
}

// TestOpenAPIMiddlewareAnswers sends the Middleware every kind of request
// the fragment documents and checks each answer against the document, so
// that a status, header or problem member the Middleware sends and the
// fragment lacks fails.
func TestOpenAPIMiddlewareAnswers(t *testing.T) {
	opts := []idempotency.Option{idempotency.WithKeyRequired(true), idempotency.WithMaxRequestBody(64), idempotency.WithMaxResponseBody(64)}
	doc := opsDocument(t, idempotency.OpenAPI(opts...))
	c := &counter{}
	h := idempotency.Middleware(newStore(t), opts...)(c)

	first := post(h, "k1", `{"n":1}`)
	checkAnswer(t, doc, first, http.StatusCreated, "k1", `{"n":1}`)
	replay := post(h, "k1", `{"n":1}`)
	wantReplay(t, replay, first)
	checkAnswer(t, doc, replay, http.StatusCreated, "k1", `{"n":1}`)
	checkAnswer(t, doc, post(h, "k1", `{"n":2}`), http.StatusUnprocessableEntity, "k1", `{"n":2}`)
	checkAnswer(t, doc, post(h, `"unterminated`, `{}`), http.StatusBadRequest, `"unterminated`, `{}`)
	checkAnswer(t, doc, post(h, "", `{}`), http.StatusBadRequest, "", `{}`)
	big := `{"n":"` + strings.Repeat("x", 64) + `"}`
	checkAnswer(t, doc, post(h, "k2", big), http.StatusRequestEntityTooLarge, "k2", big)

	// An answer over WithMaxResponseBody: sent once, then 410 replayed.
	mid := `{"n":"` + strings.Repeat("x", 40) + `"}`
	checkAnswer(t, doc, post(h, "k3", mid), http.StatusCreated, "k3", mid)
	checkAnswer(t, doc, post(h, "k3", mid), http.StatusGone, "k3", mid)

	// In progress: the first request holds the key while a second comes.
	blocking, started, release := blockEach()
	hb := idempotency.Middleware(newStore(t), opts...)(blocking)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- post(hb, "k4", `{}`) }()
	<-started
	checkAnswer(t, doc, post(hb, "k4", `{}`), http.StatusConflict, "k4", `{}`)
	close(release)
	checkAnswer(t, doc, <-done, http.StatusCreated, "k4", `{}`)

	// The store unreachable: 503, nothing ran.
	down := &faultyStore{Store: newStore(t), claim: func(context.Context, idempotency.Key, string, time.Duration, time.Duration) (idempotency.ClaimResult, error) {
		return idempotency.ClaimResult{}, errors.New("store down")
	}}
	checkAnswer(t, doc, post(idempotency.Middleware(down, opts...)(c), "k5", `{}`), http.StatusServiceUnavailable, "k5", `{}`)

	// A scope function that fails: 500, documented only with WithScope.
	scoped := append(opts, idempotency.WithScope(func(*http.Request) (string, error) { return "", errors.New("no principal") }))
	hs := idempotency.Middleware(newStore(t), scoped...)(c)
	checkAnswer(t, opsDocument(t, idempotency.OpenAPI(scoped...)), post(hs, "k6", `{}`), http.StatusInternalServerError, "k6", `{}`)
	if p := doc.Response(httptest.NewRequest(http.MethodPost, "/ops", nil), post(hs, "k6", `{}`).Result()); len(p) == 0 {
		t.Error("a 500 is documented for a Middleware without a scope function")
	}
}

// TestOpenAPIDocumentCatchesDrift shows that the checks above can fail: an
// answer that the fragment does not describe is refused.
func TestOpenAPIDocumentCatchesDrift(t *testing.T) {
	doc := opsDocument(t, idempotency.OpenAPI())
	r := httptest.NewRequest(http.MethodPost, "/ops", nil)
	answer := func(status int, h http.Header, body string) *http.Response {
		w := httptest.NewRecorder()
		for k, v := range h {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		w.Body.WriteString(body)
		return w.Result()
	}
	problem := func(typ string, status int) string {
		return `{"type":"` + typ + `","title":"t","status":` + itoa(status) + `}`
	}
	pj := http.Header{"Content-Type": {contract.ContentTypeProblem}}
	withRetry := http.Header{"Content-Type": {contract.ContentTypeProblem}, "Retry-After": {"1"}}
	if p := doc.Response(r, answer(409, withRetry, problem(idempotency.ProblemInProgress, 409))); len(p) > 0 {
		t.Fatalf("a documented 409 is refused: %v", p)
	}
	for name, resp := range map[string]*http.Response{
		"an undocumented status":          answer(418, pj, problem(idempotency.ProblemInProgress, 418)),
		"409 without Retry-After":         answer(409, pj, problem(idempotency.ProblemInProgress, 409)),
		"409 of another problem type":     answer(409, withRetry, problem(idempotency.ProblemKeyReused, 409)),
		"422 as text/plain":               answer(422, http.Header{"Content-Type": {"text/plain"}}, "key reused"),
		"400 for a missing key not asked": answer(400, pj, problem(idempotency.ProblemMissingKey, 400)),
		"a replay marked false":           answer(201, http.Header{"Content-Type": {"application/json"}, "Idempotent-Replayed": {"false"}}, `{"execution":1,"request":""}`),
	} {
		if p := doc.Response(r, resp); len(p) == 0 {
			t.Errorf("%s passes the document", name)
		}
	}
}

// TestOpenAPIKeyParameter checks that the document's Idempotency-Key
// parameter takes the keys the Middleware takes and refuses the others.
func TestOpenAPIKeyParameter(t *testing.T) {
	doc := opsDocument(t, idempotency.OpenAPI(idempotency.WithKeyRequired(true)))
	for _, tt := range []struct {
		key string
		ok  bool
	}{
		{"8e03978e-40d5-43e8-bc93-6894a57f9324", true}, {`"a,b";p=1`, true}, {strings.Repeat("k", 255), true},
		{strings.Repeat("k", 256), false}, {`"unterminated`, false}, {"a,b", false}, {"caf\u00e9", false}, {"", false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/ops", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json")
		if tt.key != "" {
			r.Header.Set(idempotency.HeaderIdempotencyKey, tt.key)
		}
		if p := doc.Request(r); (len(p) == 0) != tt.ok {
			t.Errorf("key %q: document problems %v, want valid %v", tt.key, p, tt.ok)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// ExampleOpenAPI describes a Middleware whose keys are required, kept for
// an hour and owned by the authenticated principal, and prints what each
// protected operation of the spec takes.
func ExampleOpenAPI() {
	frag := idempotency.OpenAPI(idempotency.WithKeyRequired(true), idempotency.WithTTL(time.Hour),
		idempotency.WithScope(func(r *http.Request) (string, error) { return r.Header.Get("Authorization"), nil }))
	frag.Policy.Scope.By = idempotency.ScopePrincipal // what the scope function keys by
	op := frag.Operation()
	fmt.Println(string(op.Parameters[0]))
	fmt.Println(slices.Sorted(maps.Keys(op.Responses)))
	scope, _ := json.Marshal(op.Policy.Scope)
	fmt.Println(op.Policy.TTLSeconds, op.Policy.KeyRequired, string(scope))
	// Output:
	// {"$ref":"#/components/parameters/IdempotencyKey"}
	// [400 408 409 410 413 422 500 503]
	// 3600 true {"by":"principal","perRoute":false}
}

// TestOpenAPICommitFailedRecordedNotReplayable: the description of the
// 503 of a commit that failed said that a retry replays a committed
// operation or runs one rolled back again, and the 503 response's that
// nothing was kept, where a store that recorded the key as completed but
// not replayable (ErrRecordedNotReplayable: part of the operation was
// committed) answers retries 410, as the problem's detail says.
func TestOpenAPICommitFailedRecordedNotReplayable(t *testing.T) {
	b, err := json.Marshal(idempotency.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Responses, Schemas map[string]struct{ Description string }
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]string{
		"schema IdempotencyProblemCommitFailed": doc.Components.Schemas["IdempotencyProblemCommitFailed"].Description,
		"response IdempotencyUnavailable":       doc.Components.Responses["IdempotencyUnavailable"].Description,
	} {
		if !strings.Contains(d, "410") {
			t.Errorf("the %s's description does not say that retries may get 410: %q", name, d)
		}
	}
}

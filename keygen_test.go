package saferetry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
	"github.com/saferetry/saferetry/internal/contract"
	"github.com/saferetry/saferetry/internal/testkit"
)

func TestValidateKey(t *testing.T) {
	for ok, keys := range map[bool][]string{
		true: {"a", "8e03978e-40d5-43e8-bc93-6894a57f9324", strings.Repeat("k", 255),
			"with inner space", `quote"and\backslash`, "~!@#$%^&*()"},
		false: {"", strings.Repeat("k", 256), " leading", "trailing ",
			"tab\there", "new\nline", "del\x7f", "nul\x00", "é"},
	} {
		for _, key := range keys {
			err := ValidateKey(key)
			if (err == nil) != ok {
				t.Errorf("ValidateKey(%q) = %v, want ok=%v", key, err, ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidKey) {
				t.Errorf("ValidateKey(%q) error %v does not match ErrInvalidKey", key, err)
			}
		}
	}
}

func TestParseKey(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"abc", "abc", true},
		{`"abc"`, "abc", true},
		{`"a\"b\\c"`, `a"b\c`, true},
		{`""`, "", false},
		{`"abc`, "", false},
		{`"a"b"`, "", false},
		{`a,b`, "", false},     // raw comma: several keys to a server
		{`a"b`, "", false},     // raw double quote: broken quoting
		{`"a,b"`, "a,b", true}, // the same key quoted is fine
		{`"a\b"`, "", false},
		{`"a\"`, "", false},
		{`"` + strings.Repeat("k", 255) + `"`, strings.Repeat("k", 255), true},
		{`"` + strings.Repeat("k", 256) + `"`, "", false},
		// RFC 9651: the spaces around a value are not part of it; those
		// inside an sf-string are.
		{" abc", "abc", true},
		{"\tabc ", "abc", true},
		{`"abc" `, "abc", true},
		{`" abc"`, " abc", true},
		{`"abc";p=1`, "abc", true}, // RFC 9651 parameters are ignored
		{`"abc";P=1`, "", false},   // malformed ones refused
	}
	for _, tt := range tests {
		got, err := ParseKey(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseKey(%q) = %q, %v; want %q ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"", "a", " a", "a ", "\x7f", strings.Repeat("x", 256), `"q"`, `a,b`, `a"b`, `a\b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := ValidateKey(key)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("error %v does not match ErrInvalidKey", err)
			}
			return
		}
		if len(key) < 1 || len(key) > MaxKeyLen {
			t.Fatalf("accepted key of length %d", len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("accepted byte %#x", key[i])
			}
		}
		// A valid key survives both wire forms unchanged.
		for _, structured := range []bool{false, true} {
			got, err := ParseKey(FormatKey(key, structured))
			if structured && err != nil {
				t.Fatalf("sf-string of valid key %q does not parse: %v", key, err)
			}
			if err != nil || got != key {
				t.Fatalf("round trip of %q (structured=%v) = %q, %v", key, structured, got, err)
			}
			// The idempotency middleware reads it as the same key.
			if got, err := idempotency.ParseKey(FormatKey(key, structured)); err != nil || got != key {
				t.Fatalf("idempotency.ParseKey of %q (structured=%v) = %q, %v", key, structured, got, err)
			}
		}
	})
}

// FuzzParseKey checks that both halves read every header value alike:
// what the Transport's ParseKey accepts, the idempotency middleware's
// ParseKey accepts as the same key, and what one refuses the other
// refuses; KeyFromResponse gives the same key back.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, `"`, `""`, `"\`, "plain", `"a\x"`, "a,b", `a"b`, `"a,b"`, "a\\b",
		" abc", `" abc"`, `"abc" `, "\tabc\t", `"abc";p=1`, `"a" "b"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := ParseKey(in)
		sk, serr := idempotency.ParseKey(in)
		if (err == nil) != (serr == nil) || k != sk {
			t.Fatalf("value %q: saferetry.ParseKey = %q, %v; idempotency.ParseKey = %q, %v", in, k, err, sk, serr)
		}
		resp := &http.Response{Request: &http.Request{Header: http.Header{HeaderIdempotencyKey: {in}}}}
		if rk, ok := KeyFromResponse(resp); ok != (err == nil) || rk != k {
			t.Fatalf("value %q: KeyFromResponse = %q, %v; ParseKey = %q, %v", in, rk, ok, k, err)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("ParseKey(%q): error %v does not match ErrInvalidKey", in, err)
			}
			return
		}
		if contract.ValidKey(k) != nil {
			t.Fatalf("ParseKey(%q) returned invalid key %q", in, k)
		}
		if v := strings.Trim(in, " \t"); v[0] == '"' {
			q := FormatKey(k, true)
			if rest, ok := strings.CutPrefix(v, q); !ok || (rest != "" && rest[0] != ';') {
				t.Fatalf("sf-string %q decodes to %q which re-encodes to %q", v, k, q)
			}
		}
	})
}

// TestKeyWithEdgeSpacesAgreesWithServer sends, in the header, a key that
// only an sf-string can carry: the server takes it, so the Transport sends
// it and KeyFromResponse reads it back (before the halves shared one
// grammar, the client refused it).
func TestKeyWithEdgeSpacesAgreesWithServer(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(idempotency.Middleware(store)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := idempotency.KeyFromContext(r.Context())
		mu.Lock()
		got = append(got, k)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})))
	defer srv.Close()
	tr := NewTransport(srv.Client().Transport)
	for _, wire := range []string{`" abc "`, `  " abc "	`} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
		req.Header.Set(HeaderIdempotencyKey, wire)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("header %q: %v", wire, err)
		}
		resp.Body.Close()
		if k, ok := KeyFromResponse(resp); !ok || k != " abc " {
			t.Errorf("header %q: KeyFromResponse = %q, %v; want %q", wire, k, ok, " abc ")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != " abc " {
		t.Errorf("the handler ran under %q; want once, under %q (the second send is a replay)", got, " abc ")
	}
}

func TestGeneratedKeyIsUUIDv4AndStableAcrossAttempts(t *testing.T) {
	for _, m := range []string{http.MethodPost, http.MethodPatch} {
		rc := testkit.NewRecorder(testkit.Status(503), testkit.Fail(testkit.ErrReset), testkit.Status(409), testkit.Status(201))
		tr, _, _ := testTransport(rc)
		req := newReq(t, context.Background(), m, `{"amount":1500}`)
		resp := mustRoundTrip(t, tr, req)
		seen := rc.Seen()
		if len(seen) != 4 {
			t.Fatalf("%s: attempts = %d, want 4", m, len(seen))
		}
		key := seen[0].Keys
		if len(key) != 1 {
			t.Fatalf("%s: keys on attempt 1 = %q", m, key)
		}
		u, err := uuid.Parse(key[0])
		if err != nil || u.Version() != 4 || u.String() != key[0] {
			t.Fatalf("%s: key %q is not a canonical UUIDv4", m, key[0])
		}
		for i, s := range seen {
			if len(s.Keys) != 1 || s.Keys[0] != key[0] {
				t.Errorf("%s: attempt %d key %q, want %q", m, i+1, s.Keys, key[0])
			}
			if s.Body != `{"amount":1500}` {
				t.Errorf("%s: attempt %d body %q", m, i+1, s.Body)
			}
		}
		if got, ok := KeyFromResponse(resp); !ok || got != key[0] {
			t.Errorf("KeyFromResponse = %q, %v; want %q", got, ok, key[0])
		}
		if req.Header.Get(HeaderIdempotencyKey) != "" {
			t.Error("the caller's request was given a key")
		}
	}
}

func TestKeysDifferPerOperation(t *testing.T) {
	rc := testkit.NewRecorder(testkit.Status(201))
	tr, _, _ := testTransport(rc)
	for i := 0; i < 3; i++ {
		mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x"))
	}
	s := rc.Seen()
	if s[0].Keys[0] == s[1].Keys[0] || s[1].Keys[0] == s[2].Keys[0] {
		t.Fatalf("keys repeat across operations: %q %q %q", s[0].Keys, s[1].Keys, s[2].Keys)
	}
}

func TestSuppliedKeys(t *testing.T) {
	t.Run("header wins over context", func(t *testing.T) {
		rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(201))
		tr, _, _ := testTransport(rc, WithStructuredKey(true))
		req := newReq(t, WithKey(context.Background(), "from-ctx"), http.MethodPost, "x")
		req.Header.Set(HeaderIdempotencyKey, "from-header")
		mustRoundTrip(t, tr, req)
		for i, s := range rc.Seen() {
			if len(s.Keys) != 1 || s.Keys[0] != "from-header" {
				t.Errorf("attempt %d keys %q", i+1, s.Keys)
			}
		}
	})
	t.Run("context key, raw and structured", func(t *testing.T) {
		for _, structured := range []bool{false, true} {
			rc := testkit.NewRecorder(testkit.Status(201))
			tr, _, _ := testTransport(rc, WithStructuredKey(structured))
			resp := mustRoundTrip(t, tr, newReq(t, WithKey(context.Background(), `order-42"x`), http.MethodPost, "x"))
			// A double quote is never sent raw: a server would misread it.
			want := `"order-42\"x"`
			if got := rc.Seen()[0].Keys; len(got) != 1 || got[0] != want {
				t.Errorf("structured=%v: sent %q, want %q", structured, got, want)
			}
			if k, _ := KeyFromResponse(resp); k != `order-42"x` {
				t.Errorf("KeyFromResponse = %q", k)
			}
		}
	})
	t.Run("context key on GET is sent and retried", func(t *testing.T) {
		rc := testkit.NewRecorder(testkit.Status(503), testkit.Status(200))
		tr, _, _ := testTransport(rc)
		mustRoundTrip(t, tr, newReq(t, WithKey(context.Background(), "k1"), http.MethodGet, ""))
		if s := rc.Seen(); len(s) != 2 || s[1].Keys[0] != "k1" {
			t.Fatalf("seen %+v", s)
		}
	})
	t.Run("generated structured", func(t *testing.T) {
		rc := testkit.NewRecorder(testkit.Status(201))
		tr, _, _ := testTransport(rc, WithStructuredKey(true))
		mustRoundTrip(t, tr, newReq(t, context.Background(), http.MethodPost, "x"))
		k := rc.Seen()[0].Keys[0]
		if len(k) != 38 || k[0] != '"' || k[37] != '"' {
			t.Fatalf("sent %q, want a quoted UUID", k)
		}
	})
}

func TestInvalidKeyFailsBeforeSending(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*http.Request) *http.Request
	}{
		{"empty context key", func(r *http.Request) *http.Request {
			return r.WithContext(WithKey(r.Context(), ""))
		}},
		{"long context key", func(r *http.Request) *http.Request {
			return r.WithContext(WithKey(r.Context(), strings.Repeat("k", 256)))
		}},
		{"control byte in header", func(r *http.Request) *http.Request {
			r.Header.Set(HeaderIdempotencyKey, "a\x01b")
			return r
		}},
		{"two header values", func(r *http.Request) *http.Request {
			r.Header.Add(HeaderIdempotencyKey, "a")
			r.Header.Add(HeaderIdempotencyKey, "b")
			return r
		}},
		{"comma in a raw header key", func(r *http.Request) *http.Request {
			r.Header.Set(HeaderIdempotencyKey, "a,b")
			return r
		}},
		{"bad sf-string", func(r *http.Request) *http.Request {
			r.Header.Set(HeaderIdempotencyKey, `"unterminated`)
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := testkit.NewRecorder(testkit.Status(201))
			tr, _, _ := testTransport(rc)
			body := &testkit.TrackedBody{Reader: strings.NewReader("payload")}
			req, _ := http.NewRequest(http.MethodPost, "http://api.test/", body)
			resp, err := tr.RoundTrip(tt.setup(req))
			if resp != nil {
				t.Error("response with error")
			}
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("err = %v, want ErrInvalidKey", err)
			}
			if len(rc.Seen()) != 0 {
				t.Error("request was sent")
			}
			if !body.Closed() {
				t.Error("request body not closed")
			}
		})
	}
}

// TestSuppliedKeysReachTheMiddlewareIntact sends awkward keys from WithKey,
// raw by default, to the idempotency middleware: each must arrive as the
// same key (not refused as malformed, not unquoted into another key), so
// that the retry of an operation replays it.
func TestSuppliedKeysReachTheMiddlewareIntact(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	var mu sync.Mutex
	seen := map[string]int{}
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, ok := idempotency.KeyFromContext(r.Context())
		if !ok {
			t.Errorf("handler ran without a claim")
		}
		mu.Lock()
		seen[k]++
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	})
	srv := httptest.NewServer(idempotency.Middleware(store)(app))
	defer srv.Close()
	tr := NewTransport(srv.Client().Transport)
	for _, key := range []string{"plain", `a,b`, `"quoted"`, `say "hi"`, `back\slash`, `",`} {
		for i, wantReplayed := range []string{"", "true"} {
			req, _ := http.NewRequestWithContext(WithKey(context.Background(), key), http.MethodPost, srv.URL, strings.NewReader("{}"))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("key %q: %v", key, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated || resp.Header.Get(HeaderReplayed) != wantReplayed {
				t.Errorf("key %q, send %d: %d replayed=%q; want 201 replayed=%q",
					key, i+1, resp.StatusCode, resp.Header.Get(HeaderReplayed), wantReplayed)
			}
			if k, _ := KeyFromResponse(resp); k != key {
				t.Errorf("KeyFromResponse = %q, want %q", k, key)
			}
		}
		mu.Lock()
		if n := seen[key]; n != 1 {
			t.Errorf("key %q: handler ran %d times under it, want 1 (keys seen: %v)", key, n, seen)
		}
		mu.Unlock()
	}
}

// NewKey's keys are canonical UUIDv4 of the RFC 9562 variant, and no two
// are alike, across many refills of its random pool and from many
// goroutines at once.
func TestNewKeyIsUUIDv4AndUnique(t *testing.T) {
	const goroutines, each = 8, 500 // 4,000 keys: 250 refills of the pool
	var mu sync.Mutex
	seen := make(map[string]bool, goroutines*each)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				k, err := NewKey()
				if err != nil {
					t.Error(err)
					return
				}
				u, err := uuid.Parse(k)
				if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != k {
					t.Errorf("key %q is not a canonical UUIDv4", k)
				}
				mu.Lock()
				if seen[k] {
					t.Errorf("key %q generated twice", k)
				}
				seen[k] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != goroutines*each {
		t.Fatalf("%d distinct keys, want %d", len(seen), goroutines*each)
	}
}

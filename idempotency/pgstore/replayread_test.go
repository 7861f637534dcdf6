package pgstore_test

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/pgstore"
	"github.com/saferetry/saferetry/internal/testenv"
)

// replayReadKeys are scopes and keys that pgtext encodes each its own way
// (kept as they are, or hex after Mark), around the 8-byte words of its
// ASCII test: the replay read passes them as pgtype.Text.
func replayReadKeys() []string {
	keys := []string{"", "a", "\x01", "\x01kept", "x\x01y", "nul\x00inside", "é", "caf\xc3", "\xff\xfe",
		"ünïcödé-key-0123456789", "\x7f\x7f"}
	for n := 6; n <= 18; n++ {
		keys = append(keys, strings.Repeat("k", n), strings.Repeat("k", n-1)+"\x00", strings.Repeat("k", n-1)+"\x80")
	}
	return keys
}

// TestReplayReadKeysEveryMode completes a key of each replayReadKeys
// scope and key, and replays them with the read first (always) in every
// exec mode, direct and, for the modes it allows, through PgBouncer: each
// Claim answers its own key's outcome, which Get answers too. Pins the
// replay read's pgtype.Text arguments and pgtext's ASCII test.
func TestReplayReadKeysEveryMode(t *testing.T) {
	direct := pgURL(t)
	targets := map[string]pgTarget{}
	for _, mode := range execModes {
		targets["direct/"+modeName(mode)] = pgTarget{url: direct, mode: mode}
		if bouncer := testenv.PgBouncerURL(t); !unsafeBehindPgBouncer(mode) {
			targets["pgbouncer/"+modeName(mode)] = pgTarget{url: bouncer, mode: mode, listenURL: direct}
		}
	}
	for name, tg := range targets {
		t.Run(name, func(t *testing.T) {
			s := tg.store(t, nil, pgstore.WithReplayFastPath())
			ctx := ctxT(t)
			keys := replayReadKeys()
			for i, k := range keys {
				ik := idempotency.Key{Scope: k, Key: keys[len(keys)-1-i]}
				r, err := s.Claim(ctx, ik, "fp-"+k, time.Minute, time.Hour)
				if err != nil || !r.Acquired {
					t.Fatalf("first claim of %q: %+v, %v", ik, r, err)
				}
				resp := idempotency.Response{Status: 201, Header: http.Header{"X-Key": {k}}, Body: []byte(fmt.Sprint(i))}
				if err := s.Complete(ctx, ik, r.Token, resp, time.Hour); err != nil {
					t.Fatalf("complete %q: %v", ik, err)
				}
			}
			for i, k := range keys {
				ik := idempotency.Key{Scope: k, Key: keys[len(keys)-1-i]}
				r, err := s.Claim(ctx, ik, "fp-"+k, time.Minute, time.Hour)
				if err != nil || r.Acquired || r.Entry.Response == nil {
					t.Fatalf("replay of %q: %+v, %v", ik, r, err)
				}
				got := r.Entry.Response
				if r.Entry.Fingerprint != "fp-"+k || string(got.Body) != fmt.Sprint(i) || !reflect.DeepEqual(got.Header, http.Header{"X-Key": {k}}) {
					t.Errorf("replay of %q = fingerprint %q, body %q, header %q; want its own", ik, r.Entry.Fingerprint, got.Body, got.Header)
				}
			}
		})
	}
}

// TestReplaySharedHeadersConcurrent replays, from several goroutines,
// keys of two stores whose outcomes have equal and different header sets,
// more sets than the shared table keeps, some encoded in about 512 bytes
// (the longest it keeps) and longer. Every replay answers its own
// key's header; a Get's answer, which is the caller's to change, changed
// between replays, changes no replay's. Run with -race.
func TestReplaySharedHeadersConcurrent(t *testing.T) {
	pool := newPool(t)
	stores := []*pgstore.Store{
		newStore(t, pool, pgstore.WithReplayFastPath()),
		newStore(t, pool, pgstore.WithReplayFastPath()),
	}
	header := func(i int) http.Header {
		switch set := i % 48; {
		case set < 4: // a few sets that many keys share
			return http.Header{"Content-Type": {"application/json"}, "X-Set": {fmt.Sprint(set)}}
		case set < 40:
			// Equal up to a long common value, different past 512 bytes
			// for some.
			return http.Header{"X-Long": {strings.Repeat("v", 480+set)}, "X-Set": {fmt.Sprint(set), "again"}}
		default:
			return http.Header{"X-Set": {fmt.Sprint(set)}, "X-Empty": {}}
		}
	}
	const keys = 96
	ctx := ctxT(t)
	for _, s := range stores {
		for i := range keys {
			k := key(fmt.Sprint("shared-", i))
			r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
			if err != nil || !r.Acquired {
				t.Fatalf("first claim: %+v, %v", r, err)
			}
			if err := s.Complete(ctx, k, r.Token, idempotency.Response{Status: 200, Header: header(i)}, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for n := range 3 * keys {
				i := (n*7 + g*13) % keys
				s := stores[(n+g)%len(stores)]
				k := key(fmt.Sprint("shared-", i))
				if g%3 == 0 {
					e, found, err := s.Get(ctx, k)
					if err != nil || !found || e.Response == nil {
						t.Errorf("Get: %+v, %v, %v", e, found, err)
						return
					}
					for _, name := range slices.Collect(maps.Keys(e.Response.Header)) {
						for j := range e.Response.Header[name] {
							e.Response.Header[name][j] = "changed by the reader"
						}
						e.Response.Header[name+"-Added"] = []string{"x"}
					}
					e.Response.Header.Set("X-Set", "changed")
					continue
				}
				r, err := s.Claim(ctx, k, "fp", time.Minute, time.Hour)
				if err != nil || r.Acquired || r.Entry.Response == nil {
					t.Errorf("replay: %+v, %v", r, err)
					return
				}
				if want := header(i); !reflect.DeepEqual(r.Entry.Response.Header, want) {
					t.Errorf("replay of key %d: header %q, want %q", i, r.Entry.Response.Header, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// scribbler is a ResponseWriter that, like a careless outer middleware,
// changes the header values it was given in place, and appends to them,
// once the status is written.
type scribbler struct{ *httptest.ResponseRecorder }

func (s scribbler) WriteHeader(code int) {
	for name, v := range s.Header() {
		for i := range v {
			v[i] = "scribbled"
		}
		s.Header()[name] = append(v[:len(v):len(v)], "appended")
	}
	s.ResponseRecorder.WriteHeader(code)
}

// TestReplaySharedHeadersThroughMiddleware replays, through the
// Middleware, keys whose first answers had the same headers (so that
// pgstore's replays share one stored header, in lease and transactional
// mode), to a writer that scribbles on the headers it is given: every
// later replay, of that key or another, carries the first answer's.
func TestReplaySharedHeadersThroughMiddleware(t *testing.T) {
	for _, mode := range []string{"lease", "tx"} {
		t.Run(mode, func(t *testing.T) {
			var store idempotency.Store
			if mode == "lease" {
				store = newStore(t, nil, pgstore.WithReplayFastPath())
			} else {
				store = newTxStore(t, nil, pgstore.WithReplayFastPath())
			}
			h := idempotency.Middleware(store)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header()["Link"] = []string{"</a>", "</b>"}
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(`{}`))
			}))
			send := func(w http.ResponseWriter, key string) {
				r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{}`))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set(idempotency.HeaderIdempotencyKey, key)
				h.ServeHTTP(w, r)
			}
			for _, k := range []string{"a", "b", "c"} {
				w := httptest.NewRecorder()
				send(w, k)
				if w.Code != http.StatusCreated || w.Header().Get(idempotency.HeaderReplayed) != "" {
					t.Fatalf("first answer of %s: %d %q", k, w.Code, w.Header())
				}
			}
			for range 3 {
				for _, k := range []string{"a", "b"} {
					send(scribbler{httptest.NewRecorder()}, k)
				}
			}
			for _, k := range []string{"a", "b", "c"} {
				w := httptest.NewRecorder()
				send(w, k)
				if w.Header().Get(idempotency.HeaderReplayed) != "true" ||
					!slices.Equal(w.Header()["Content-Type"], []string{"application/json"}) ||
					!slices.Equal(w.Header()["Link"], []string{"</a>", "</b>"}) {
					t.Errorf("replay of %s after writers scribbled on replays: %d %q", k, w.Code, w.Header())
				}
			}
		})
	}
}

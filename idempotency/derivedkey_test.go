package idempotency_test

import (
	"context"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/testenv"
)

// uuidV8 is the text form of a version 8, RFC 9562 variant UUID.
var uuidV8 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// derivedIn runs one protected request with key (and scope) through a
// Middleware over st and returns the derived keys the handler saw for
// labels.
func derivedIn(t *testing.T, h http.Handler, key string) string {
	t.Helper()
	w := post(h, key, `{}`)
	if w.Code != http.StatusCreated && w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d %s", w.Code, w.Body)
	}
	return w.Header().Get("X-Derived")
}

func TestDerivedKey(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{} // label+key -> derived keys seen, run after run
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := idempotency.ScopedKeyFromContext(r.Context())
		charge, ok1 := idempotency.DerivedKey(r.Context(), "charge")
		email, ok2 := idempotency.DerivedKey(r.Context(), "email")
		if !ok1 || !ok2 {
			t.Errorf("DerivedKey unavailable inside a protected request")
		}
		again, _ := idempotency.DerivedKey(r.Context(), "charge")
		if again != charge {
			t.Errorf("two calls in one run differ: %s, %s", charge, again)
		}
		mu.Lock()
		seen["charge/"+k.Scope+"/"+k.Key] = append(seen["charge/"+k.Scope+"/"+k.Key], charge)
		seen["email/"+k.Scope+"/"+k.Key] = append(seen["email/"+k.Scope+"/"+k.Key], email)
		n := len(seen["charge/"+k.Scope+"/"+k.Key])
		mu.Unlock()
		w.Header().Set("X-Derived", charge)
		if n == 1 && k.Key == "retried" {
			w.WriteHeader(http.StatusServiceUnavailable) // released: the retry runs again
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	tenant := "t1"
	h := idempotency.Middleware(newStore(t), idempotency.WithScope(func(*http.Request) (string, error) { return tenant, nil }))(app)

	first := derivedIn(t, h, "retried")
	if !uuidV8.MatchString(first) {
		t.Fatalf("derived key %q is not a version 8 UUID", first)
	}
	if second := derivedIn(t, h, "retried"); second != first {
		t.Fatalf("a retry derived %s, the first attempt %s", second, first)
	}
	other := derivedIn(t, h, "other-key")
	tenant = "t2"
	otherScope := derivedIn(t, h, "retried")
	if other == first || otherScope == first || other == otherScope {
		t.Fatalf("derived keys collide: key %s, other key %s, other scope %s", first, other, otherScope)
	}
	mu.Lock()
	defer mu.Unlock()
	if c, e := seen["charge/t1/retried"][0], seen["email/t1/retried"][0]; c == e {
		t.Fatalf("labels charge and email derive the same key %s", c)
	}
	// Valid as an Idempotency-Key on both halves.
	if _, err := saferetry.ParseKey(first); err != nil {
		t.Errorf("saferetry.ParseKey(%q): %v", first, err)
	}
	if k, err := idempotency.ParseKey(first); err != nil || k != first {
		t.Errorf("idempotency.ParseKey(%q) = %q, %v", first, k, err)
	}
}

// TestDerivedKeyStableAcrossTakeover checks that a run that takes over a
// lapsed claim on another instance derives the same key as the first run.
func TestDerivedKeyStableAcrossTakeover(t *testing.T) {
	st := newStore(t)
	derived := make(chan string, 2)
	release := make(chan struct{})
	var runs atomic.Int64
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := idempotency.DerivedKey(r.Context(), "payment")
		derived <- k
		if runs.Add(1) == 1 { // the first run: frozen until the takeover ran
			<-release
		}
		w.WriteHeader(http.StatusCreated)
	})
	frozen := &faultyStore{Store: st, renew: func(context.Context, idempotency.Key, int64, time.Duration) error {
		return context.DeadlineExceeded // a paused process's renewals never land
	}}
	a := idempotency.Middleware(frozen, idempotency.WithLease(60*time.Millisecond))(app)
	b := idempotency.Middleware(st, idempotency.WithLease(60*time.Millisecond))(app)
	go post(a, "op", `{}`)
	firstRun := <-derived
	testenv.Eventually(t, "B takes the key over", func() bool { return post(b, "op", `{}`).Code == http.StatusCreated })
	close(release)
	select {
	case takeover := <-derived:
		if takeover != firstRun {
			t.Fatalf("the takeover derived %s, the first run %s", takeover, firstRun)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("the takeover's handler never ran")
	}
}

func TestDerivedKeyOutsideAProtectedRequest(t *testing.T) {
	if k, ok := idempotency.DerivedKey(context.Background(), "charge"); ok || k != "" {
		t.Fatalf("DerivedKey(Background) = %q, %v; want none", k, ok)
	}
	var got bool
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, got = idempotency.DerivedKey(r.Context(), "charge")
	})
	h := idempotency.Middleware(newStore(t))(app)
	send(h, http.MethodGet, "k", "") // GET is not protected
	if got {
		t.Fatal("DerivedKey available in an unprotected GET")
	}
	post(h, "", `{}`) // no key, none required
	if got {
		t.Fatal("DerivedKey available in a request without a key")
	}
}

package idempotency_test

import (
	"net/http"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// panickingBody is a request body whose Read panics, as a body wrapped by
// a buggy handler in front of the Middleware might.
type panickingBody struct{}

func (panickingBody) Read([]byte) (int, error) { panic("body bug") }
func (panickingBody) Close() error             { return nil }

// TestAdmissionPanicGivesOneEvent checks that a request whose body's Read
// or scope function panics, before any store call, still gives its one
// event, labelled as the failure it is on admission (bad_request for the
// body, scope_error for the scope function) with no status, since nothing
// was sent; the panic goes on as it was, also when a hook panics on the
// event. Without it, metrics fed by the hook miss the request.
func TestAdmissionPanicGivesOneEvent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		body      bool // the body panics, not the scope function
		hookPanic bool
		want      idempotency.Outcome
	}{
		{"body", true, false, idempotency.OutcomeBadRequest},
		{"scope", false, false, idempotency.OutcomeScopeError},
		{"body, the hook panics too", true, true, idempotency.OutcomeBadRequest},
		{"scope, the hook panics too", false, true, idempotency.OutcomeScopeError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ev events
			opts := []idempotency.Option{idempotency.WithHook(ev.hook),
				idempotency.WithScope(func(*http.Request) (string, error) {
					if !tc.body {
						panic("scope bug")
					}
					return "tenant", nil
				})}
			if tc.hookPanic {
				opts = append(opts, idempotency.WithHook(func(idempotency.Event) { panic("hook bug") }))
			}
			h := idempotency.Middleware(newStore(t), opts...)(&counter{})
			var body reqOpt
			if tc.body {
				body = func(r *http.Request) { r.Body, r.ContentLength = panickingBody{}, -1 }
			} else {
				body = func(*http.Request) {}
			}
			p := func() (p any) {
				defer func() { p = recover() }()
				post(h, "k", `{}`, body)
				return nil
			}()
			want := "scope bug"
			if tc.body {
				want = "body bug"
			}
			if p != want {
				t.Fatalf("panic %v went on, want %q", p, want)
			}
			if len(ev.got) != 1 {
				t.Fatalf("%d events %v, want 1", len(ev.got), ev.outcomes())
			}
			if e := ev.got[0]; e.Outcome != tc.want || e.Status != 0 || e.Err == nil || e.Key.Key != "k" {
				t.Errorf("event %s status %d err %v key %+v, want %s with no status, an error, key k", e.Outcome, e.Status, e.Err, e.Key, tc.want)
			}
		})
	}
}

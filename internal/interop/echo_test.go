package interop_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/saferetry/saferetry/idempotency"
)

// errDatabaseDown is what the echo handlers below fail with: echo renders an
// error that is not an *echo.HTTPError as 500.
var errDatabaseDown = errors.New("database down")

// The trap: echo renders a handler's returned error after the whole
// middleware chain returned, so the Middleware wrapped by echo.WrapMiddleware
// has by then recorded what the handler wrote, nothing: an implicit 200 with
// an empty body. The 500 becomes a stored success, replayed for the TTL, and
// the retry that should have run the handler again never does. This test
// pins the behaviour down; Example_echo and TestEchoRenderErrorsInside show
// the cure.
func TestEchoNaiveWrapStoresTheWrongAnswer(t *testing.T) {
	var executions atomic.Int64
	e := echo.New()
	e.Use(echo.WrapMiddleware(idempotency.Middleware(newStore(t))))
	e.POST("/orders", func(c echo.Context) error {
		executions.Add(1)
		return errDatabaseDown
	})

	first := post(e, "/orders", "order-1", `{"sku":"A1"}`)
	retry := post(e, "/orders", "order-1", `{"sku":"A1"}`)

	if first.Code != http.StatusOK || first.Body.Len() != 0 {
		t.Errorf("first answer %d %q; expected the recorded empty 200 (echo's 500 written too late)", first.Code, first.Body)
	}
	if retry.Code != http.StatusOK || retry.Body.Len() != 0 || retry.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("retry %d %q replayed %q; expected the stored empty 200 replayed",
			retry.Code, retry.Body, retry.Header().Get(idempotency.HeaderReplayed))
	}
	if got := executions.Load(); got != 1 {
		t.Errorf("handler ran %d times; the stored 200 was expected to keep the retry from running it", got)
	}
}

// With renderErrors inside the wrapped Middleware, the Middleware records
// what echo renders: a 500 is not stored, so the retry runs the handler again;
// a 4xx error and a success are stored and replayed byte for byte.
func TestEchoRenderErrorsInside(t *testing.T) {
	var executions atomic.Int64
	e := echo.New()
	e.Use(echo.WrapMiddleware(idempotency.Middleware(newStore(t))), renderErrors)
	e.POST("/orders", func(c echo.Context) error {
		executions.Add(1)
		switch c.Request().Header.Get(idempotency.HeaderIdempotencyKey) {
		case "down":
			return errDatabaseDown
		case "declined":
			return echo.NewHTTPError(http.StatusPaymentRequired, "card declined")
		}
		return c.JSON(http.StatusCreated, map[string]string{"id": "ord_1"})
	})

	for _, tc := range []struct {
		key    string
		status int
		body   string
		runs   int64 // executions after two requests with the key
	}{
		{"down", http.StatusInternalServerError, `{"message":"Internal Server Error"}` + "\n", 2},
		{"declined", http.StatusPaymentRequired, `{"message":"card declined"}` + "\n", 1},
		{"ok", http.StatusCreated, `{"id":"ord_1"}` + "\n", 1},
	} {
		t.Run(tc.key, func(t *testing.T) {
			before := executions.Load()
			first := post(e, "/orders", tc.key, `{"sku":"A1"}`)
			retry := post(e, "/orders", tc.key, `{"sku":"A1"}`)
			if first.Code != tc.status || first.Body.String() != tc.body {
				t.Fatalf("first answer %d %q, want %d %q", first.Code, first.Body, tc.status, tc.body)
			}
			if got := executions.Load() - before; got != tc.runs {
				t.Errorf("handler ran %d times, want %d", got, tc.runs)
			}
			if tc.runs == 1 {
				requireReplayOf(t, retry, first)
				return
			}
			if retry.Code != tc.status || retry.Header().Get(idempotency.HeaderReplayed) != "" {
				t.Errorf("retry of a 5xx: %d replayed %q, want the handler's %d again",
					retry.Code, retry.Header().Get(idempotency.HeaderReplayed), tc.status)
			}
		})
	}
}

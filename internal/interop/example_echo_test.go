package interop_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

// renderErrors renders a handler's returned error with echo's
// HTTPErrorHandler at once, and returns nil so that echo does not render it
// a second time. Placed inside echo.WrapMiddleware(idempotency.Middleware(...)),
// it makes the error's answer part of what the Middleware records.
func renderErrors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := next(c); err != nil {
			c.Error(err)
		}
		return nil
	}
}

// Echo renders an error returned by a handler after its whole middleware
// chain returned: too late for idempotency.Middleware, which would record an
// empty 200. renderErrors, given to Use after the wrapped Middleware, renders
// it inside, so the Middleware records the answer the client got: the 402
// below is stored and replayed, and a 500 would be released for a retry.
func Example_echo() {
	store := memstore.New()
	defer store.Close()

	e := echo.New()
	e.Use(echo.WrapMiddleware(idempotency.Middleware(store)), renderErrors)
	e.POST("/orders", func(c echo.Context) error {
		return echo.NewHTTPError(http.StatusPaymentRequired, "card declined")
	})

	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(`{"sku":"A1"}`))
		req.Header.Set("Idempotency-Key", "order-1")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		fmt.Printf("%d replayed=%q %s", rec.Code, rec.Header().Get("Idempotent-Replayed"), rec.Body)
	}
	// Output:
	// 402 replayed="" {"message":"card declined"}
	// 402 replayed="true" {"message":"card declined"}
}

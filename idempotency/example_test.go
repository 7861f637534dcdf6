package idempotency_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/idempotency/memstore"
)

// A debit endpoint made safe to retry: the second delivery of the same
// request is answered from the store, and the debit happens once.
func ExampleMiddleware() {
	store := memstore.New()
	defer store.Close()

	debits := 0
	debit := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		debits++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"debit":%d}`, debits)
	})
	srv := httptest.NewServer(idempotency.Middleware(store, idempotency.WithKeyRequired(true))(debit))
	defer srv.Close()

	send := func(key, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/debits", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set(idempotency.HeaderIdempotencyKey, key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Content-Type") == idempotency.ContentTypeProblem {
			fmt.Println(resp.StatusCode, "problem")
			return
		}
		fmt.Printf("%d replayed=%q %s\n", resp.StatusCode, resp.Header.Get(idempotency.HeaderReplayed), b)
	}
	const key = "8e03978e-40d5-43e8-bc93-6894a57f9324"
	send(key, `{"account":"a","amount":10}`)
	send(key, `{"amount":10, "account":"a"}`) // same request, reformatted
	send(key, `{"account":"a","amount":99}`)  // same key, other request
	send("", `{"account":"a","amount":10}`)   // no key
	fmt.Println("debits:", debits)
	// Output:
	// 201 replayed="" {"debit":1}
	// 201 replayed="true" {"debit":1}
	// 422 problem
	// 400 problem
	// debits: 1
}

func ExampleParseKey() {
	for _, v := range []string{`8e03978e-40d5`, `"quoted \"key\""`, `a, b`, ``} {
		k, err := idempotency.ParseKey(v)
		fmt.Printf("%q %v\n", k, err)
	}
	// Output:
	// "8e03978e-40d5" <nil>
	// "quoted \"key\"" <nil>
	// "" idempotency: malformed Idempotency-Key: the value holds several keys
	// "" idempotency: malformed Idempotency-Key: the value is empty
}

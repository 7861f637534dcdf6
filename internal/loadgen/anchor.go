package loadgen

import "net/http"

// PaymentAnchor is the raw anchor of a payments server: it reads the whole
// request body and answers 201 with a payment-shaped JSON body as long as
// the mock server's answer to a payment, Idempotency-Key echoed. It checks
// nothing and stores nothing: what any server of a payment does at the
// least. It is safe for concurrent use.
func PaymentAnchor(w http.ResponseWriter, r *http.Request) {
	var buf [512]byte
	for {
		if _, err := r.Body.Read(buf[:]); err != nil {
			break
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"id":"pay_0123456789abcdef","amount":1,"currency":"EUR","recipient":"acct_1","status":"succeeded","idempotency_key":"` + r.Header.Get("Idempotency-Key") + `"}` + "\n"))
}

package mockserver

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/saferetry/saferetry/idempotency"
)

// DefaultBalance is the balance, in minor units, that every currency starts
// with unless WithBalance set another: 1,000,000 (10,000.00 in a currency
// with two decimals).
const DefaultBalance int64 = 1_000_000

// Payment is one executed payment, as POST /payments answers it and GET
// /payments lists it. Two payments with the same IdempotencyKey are a double
// execution. It is a plain value, safe to copy and to read from several
// goroutines at once.
type Payment struct {
	// ID is "pay_" followed by 16 random hex digits.
	ID string `json:"id"`
	// Amount is in minor units of Currency; always > 0.
	Amount int64 `json:"amount"`
	// Currency is three upper-case letters.
	Currency string `json:"currency"`
	// Recipient is the non-blank recipient of the request; it never
	// contains U+0000.
	Recipient string `json:"recipient"`
	// Status is always "succeeded".
	Status string `json:"status"`
	// IdempotencyKey is the key of the request that created the payment.
	IdempotencyKey string `json:"idempotency_key"`
	// Ref is what the ledger keys the payment by: the request's
	// idempotency.DerivedKey for the label "payment", the same on every
	// execution of the operation, so a re-run finds this payment for the
	// idempotency TTL (see Ledger.Pay; WithUnkeyedPayments gives every
	// execution a ref of its own). After the TTL the same key pays anew,
	// under the same ref; pgledger then renames the lapsed payment's ref
	// (see its package documentation).
	Ref string `json:"ref"`
	// Created is when the payment executed.
	Created time.Time `json:"created"`
}

// paymentsPath is the path of a payment, before its ID.
const paymentsPath = "/payments/"

// newPaymentLocation returns the path of a fresh payment, paymentsPath and
// a new ID (see newPaymentID), in one string: the ID is its tail, which
// the answer's Location header shares. The ID's 64 bits come from
// math/rand/v2's generator, seeded by the runtime from the system's
// randomness, at a fraction of crypto/rand's cost: a mock's IDs need to
// be unique, not unguessable.
func newPaymentLocation() string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], rand.Uint64())
	const head = paymentsPath + "pay_"
	loc := [len(head) + 2*len(b)]byte{}
	copy(loc[:], head)
	hex.Encode(loc[len(head):], b[:])
	return string(loc[:])
}

// newPaymentID returns a fresh payment ID: "pay_" and 16 hex digits.
func newPaymentID() string { return newPaymentLocation()[len(paymentsPath):] }

// createPayment is the handler behind the idempotency middleware: every call
// is one execution.
func (s *Server) createPayment(w http.ResponseWriter, r *http.Request) {
	st := stateFrom(r.Context())
	key := st.key
	if k, ok := idempotency.KeyFromContext(r.Context()); ok {
		key = k
	}

	if d, ok := s.faults.takeDelay(); ok && d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			// The client went away, or the claim's lease was lost: run
			// nothing, store nothing (a 5xx releases the claim), so a
			// retry executes normally.
			writeProblem(w, problem{Type: ProblemAborted, Title: "Request aborted", Status: http.StatusServiceUnavailable,
				Detail: "the request ended during an injected delay (" + context.Cause(r.Context()).Error() + "); the payment did not run"})
			return
		}
	}

	st.executed.Store(true)
	pos := st.pos
	if key != st.key {
		pos = keyPos{} // the record attempt made is another key's
	}
	s.insp.execution(key, pos)

	buf := getBuffer()
	defer putBuffer(buf)
	if n := bufferedLen(r); n >= int64(cap(*buf)) && n <= s.maxBody {
		*buf = make([]byte, 0, n+1) // +1 to see EOF without growing
	}
	body, err := appendAll(*buf, r.Body, s.maxBody+1)
	*buf = body
	var req paymentRequest
	var errs []FieldError
	switch {
	case err != nil:
		errs = []FieldError{{Detail: "could not read the body"}}
	case int64(len(body)) > s.maxBody:
		// Only a handler around this one (WithHandlerMiddleware) that
		// gave it another body can pass it more than the Middleware
		// read.
		errs = []FieldError{{Detail: "body is over " + strconv.FormatInt(s.maxBody, 10) + " bytes"}}
	default:
		req, errs = parsePaymentRequest(body)
	}

	if len(errs) > 0 {
		writeProblem(w, problem{Type: ProblemValidation, Title: "Invalid payment request", Status: http.StatusBadRequest,
			Detail: describe(errs), Errors: errs})
		return
	}
	// Every execution of the operation pays under the same ref, so a re-run
	// (a takeover after this instance died or paused) finds the payment of
	// the earlier run and answers with it instead of paying twice; for the
	// idempotency TTL only, so that the key runs anew after it (see
	// Ledger.Pay).
	ref, keyed := idempotency.DerivedKey(r.Context(), "payment")
	if !keyed || s.unkeyed {
		ref = "unkeyed-" + newPaymentID()
	}
	location := newPaymentLocation()
	made := Payment{
		ID:             location[len(paymentsPath):],
		Amount:         req.Amount,
		Currency:       req.Currency,
		Recipient:      req.Recipient,
		Status:         "succeeded",
		IdempotencyKey: key,
		Ref:            ref,
		Created:        time.Now().UTC().Truncate(time.Millisecond),
	}
	p, found, err := s.ledger.Pay(r.Context(), ref, s.refKeep, made)
	switch {
	case errors.Is(err, ErrInsufficientFunds):
		writeProblem(w, problem{Type: ProblemInsufficientFunds, Title: "Insufficient funds", Status: http.StatusPaymentRequired,
			Detail: "the amount exceeds the " + req.Currency + " balance"})
		return
	case err != nil:
		// Nothing was paid (the ledger's write is atomic), or the answer
		// to a write that went through was lost; a 5xx releases the
		// claim, so a retry runs the payment again, which finds such a
		// payment by its DerivedKey (keyed payments).
		s.log(r.Context(), "mockserver: ledger failed", "key", key, "error", err)
		writeProblem(w, problem{Type: ProblemLedgerUnavailable, Title: "Ledger unavailable", Status: http.StatusServiceUnavailable,
			Detail: "the payment could not be recorded: " + err.Error()})
		return
	}
	switch {
	case s.logger == nil: // spare the arguments' allocations
	case found:
		s.log(r.Context(), "mockserver: payment found from an earlier execution", "key", key, "id", p.ID)
	default:
		s.log(r.Context(), "mockserver: payment executed", "key", key, "id", p.ID, "amount", p.Amount, "currency", p.Currency)
	}
	if s.work > 0 {
		t := time.NewTimer(s.work)
		<-t.C
	}
	writeCreatedWith(w, &p, &made, location, st.answerValues())
}

// ledgerFailed answers a read of the ledger that failed.
func ledgerFailed(w http.ResponseWriter, err error) {
	writeProblem(w, problem{Type: ProblemLedgerUnavailable, Title: "Ledger unavailable", Status: http.StatusServiceUnavailable,
		Detail: err.Error()})
}

func describe(errs []FieldError) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		if e.Field == "" {
			parts = append(parts, e.Detail)
			continue
		}
		parts = append(parts, e.Field+" "+e.Detail)
	}
	return strings.Join(parts, "; ")
}

func (s *Server) listPayments(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ledgerContext(r.Context())
	defer cancel()
	ps, err := s.ledger.Payments(ctx)
	if err != nil {
		ledgerFailed(w, err)
		return
	}
	if ps == nil {
		ps = []Payment{}
	}
	writeJSON(w, http.StatusOK, ps)
}

func (s *Server) getPayment(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ledgerContext(r.Context())
	defer cancel()
	p, ok, err := s.ledger.Payment(ctx, r.PathValue("id"))
	if err != nil {
		ledgerFailed(w, err)
		return
	}
	if !ok {
		writeProblem(w, problem{Type: ProblemNotFound, Title: "Not Found", Status: http.StatusNotFound, Detail: "no such payment"})
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// balanceResponse is the body of GET /balance.
type balanceResponse struct {
	Balances map[string]int64 `json:"balances"`
}

func (s *Server) getBalance(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.ledgerContext(r.Context())
	defer cancel()
	if c := r.URL.Query().Get("currency"); c != "" {
		if !isCurrency(c) {
			writeProblem(w, problem{Type: ProblemValidation, Title: "Invalid currency", Status: http.StatusBadRequest,
				Detail: "currency must be three letters", Errors: []FieldError{{Field: "currency", Detail: "must be three letters"}}})
			return
		}
		c = strings.ToUpper(c)
		b, err := s.ledger.Balance(ctx, c)
		if err != nil {
			ledgerFailed(w, err)
			return
		}
		writeJSON(w, http.StatusOK, balanceResponse{Balances: map[string]int64{c: b}})
		return
	}
	bs, err := s.ledger.Balances(ctx)
	if err != nil {
		ledgerFailed(w, err)
		return
	}
	writeJSON(w, http.StatusOK, balanceResponse{Balances: bs})
}

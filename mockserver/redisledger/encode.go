package redisledger

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/saferetry/saferetry/mockserver"
)

// createdLayout is RFC 3339 with milliseconds, the precision at which the
// Server makes Payment.Created.
const createdLayout = "2006-01-02T15:04:05.000Z07:00"

// record is a payment as the ledger stores it: JSON, Created in UTC to the
// millisecond.
type record struct {
	ID             string `json:"id"`
	Ref            string `json:"ref"`
	IdempotencyKey string `json:"idempotency_key"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Recipient      string `json:"recipient"`
	Status         string `json:"status"`
	Created        string `json:"created"`
}

// encodePayment returns the stored form of p. It refuses strings that are
// not valid UTF-8, which JSON would silently alter: the payment read back
// must be the one recorded.
func encodePayment(p mockserver.Payment) (string, error) {
	for _, f := range []struct{ name, v string }{
		{"id", p.ID}, {"ref", p.Ref}, {"idempotency key", p.IdempotencyKey},
		{"currency", p.Currency}, {"recipient", p.Recipient}, {"status", p.Status},
	} {
		if !utf8.ValidString(f.v) {
			return "", fmt.Errorf("the payment's %s is not valid UTF-8", f.name)
		}
	}
	b, err := json.Marshal(record{
		ID:             p.ID,
		Ref:            p.Ref,
		IdempotencyKey: p.IdempotencyKey,
		Amount:         p.Amount,
		Currency:       p.Currency,
		Recipient:      p.Recipient,
		Status:         p.Status,
		Created:        p.Created.UTC().Format(createdLayout),
	})
	return string(b), err
}

func decodePayment(s string) (mockserver.Payment, error) {
	var r record
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return mockserver.Payment{}, fmt.Errorf("decode payment: %w", err)
	}
	created, err := time.Parse(time.RFC3339, r.Created)
	if err != nil {
		return mockserver.Payment{}, fmt.Errorf("decode payment %s: %w", r.ID, err)
	}
	return mockserver.Payment{
		ID:             r.ID,
		Amount:         r.Amount,
		Currency:       r.Currency,
		Recipient:      r.Recipient,
		Status:         r.Status,
		IdempotencyKey: r.IdempotencyKey,
		Ref:            r.Ref,
		Created:        created.UTC(),
	}, nil
}

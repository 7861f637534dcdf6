package redisledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/saferetry/saferetry/mockserver"
)

var _ mockserver.Ledger = (*Ledger)(nil)

// errIDTaken is returned (wrapped) by Pay when another payment already has
// the new payment's ID, which the Server's random IDs make all but
// impossible.
var errIDTaken = errors.New("payment ID already taken by another payment")

// Ledger is a mockserver.Ledger kept in Redis under a key prefix: Ledgers
// with the same prefix over the same Redis, in any number of processes,
// share their payments and balances. Create it with New; the zero value is
// not usable. It is safe for concurrent use by multiple goroutines and
// processes. Most callers only hand it to mockserver.WithLedger; Pay is
// the method that matters, one atomic script per payment.
type Ledger struct {
	rdb     redis.UniversalClient
	keys    keys
	opening map[string]int64
}

// New returns a Ledger that keeps its records in rdb under keys starting
// with prefix (for example "saferetry:mock:ns:"). opening holds the opening
// balances, in minor units, by currency; a nil map, or a currency missing
// from it, opens at mockserver.DefaultBalance. New copies opening; every
// process over the same prefix must pass the same. New does not touch Redis
// and does not close rdb. It panics when rdb is nil or prefix contains '{'
// or '}' (see ValidatePrefix): both are programming errors.
func New(rdb redis.UniversalClient, prefix string, opening map[string]int64) *Ledger {
	if rdb == nil {
		panic("redisledger: New called with a nil client")
	}
	if err := ValidatePrefix(prefix); err != nil {
		panic(err.Error())
	}
	return &Ledger{rdb: rdb, keys: newKeys(prefix), opening: maps.Clone(opening)}
}

// Pay implements mockserver.Ledger in one round trip (see the package
// documentation). It stores Created to the millisecond, in UTC, and returns
// the payment as stored, the same on every later call with ref while that
// payment is kept. It refuses
// an amount that is not positive and strings that are not valid UTF-8.
func (l *Ledger) Pay(ctx context.Context, ref string, keep time.Duration, p mockserver.Payment) (mockserver.Payment, bool, error) {
	if err := ctx.Err(); err != nil {
		return mockserver.Payment{}, false, fmt.Errorf("redisledger: pay: %w", err)
	}
	if p.Amount <= 0 {
		return mockserver.Payment{}, false, fmt.Errorf("redisledger: pay: amount %d is not positive", p.Amount)
	}
	p.Ref = ref
	js, err := encodePayment(p)
	if err != nil {
		return mockserver.Payment{}, false, fmt.Errorf("redisledger: pay: %w", err)
	}
	cutoff := ""
	if keep > 0 {
		cutoff = p.Created.UTC().Add(-keep).Format(createdLayout)
	}
	res, err := payScript.Run(ctx, l.rdb, l.keys.all(),
		ref, p.ID, p.Currency, strconv.FormatInt(p.Amount, 10),
		strconv.FormatInt(mockserver.OpeningBalance(l.opening, p.Currency), 10), js, cutoff).Slice()
	if err != nil {
		return mockserver.Payment{}, false, fmt.Errorf("redisledger: pay: %w", err)
	}
	var reply, arg string
	if len(res) > 0 {
		reply, _ = res[0].(string)
	}
	if len(res) > 1 {
		arg, _ = res[1].(string)
	}
	switch reply {
	case replyPaid, replyFound:
		got, err := decodePayment(arg)
		if err != nil {
			return mockserver.Payment{}, false, fmt.Errorf("redisledger: pay: %w", err)
		}
		return got, reply == replyFound, nil
	case replyShort:
		return mockserver.Payment{}, false, fmt.Errorf("redisledger: pay: %w: %s balance %s is below %d",
			mockserver.ErrInsufficientFunds, p.Currency, arg, p.Amount)
	case replyIDTaken:
		return mockserver.Payment{}, false, fmt.Errorf("redisledger: pay: %s: %w", p.ID, errIDTaken)
	}
	return mockserver.Payment{}, false, fmt.Errorf("redisledger: pay: unexpected script reply %.64v", res)
}

// Payments implements mockserver.Ledger in one round trip.
func (l *Ledger) Payments(ctx context.Context) ([]mockserver.Payment, error) {
	list, err := l.rdb.LRange(ctx, l.keys.payments, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("redisledger: payments: %w", err)
	}
	ps := make([]mockserver.Payment, 0, len(list))
	for _, js := range list {
		p, err := decodePayment(js)
		if err != nil {
			return nil, fmt.Errorf("redisledger: payments: %w", err)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// Payment implements mockserver.Ledger in one round trip.
func (l *Ledger) Payment(ctx context.Context, id string) (mockserver.Payment, bool, error) {
	js, err := l.rdb.HGet(ctx, l.keys.ids, id).Result()
	if errors.Is(err, redis.Nil) {
		return mockserver.Payment{}, false, nil
	}
	if err != nil {
		return mockserver.Payment{}, false, fmt.Errorf("redisledger: payment: %w", err)
	}
	p, err := decodePayment(js)
	if err != nil {
		return mockserver.Payment{}, false, fmt.Errorf("redisledger: payment: %w", err)
	}
	return p, true, nil
}

// Balances implements mockserver.Ledger in one round trip: the stored
// balance of every currency paid in, and the opening balance of every other
// currency given one.
func (l *Ledger) Balances(ctx context.Context) (map[string]int64, error) {
	stored, err := l.rdb.HGetAll(ctx, l.keys.balances).Result()
	if err != nil {
		return nil, fmt.Errorf("redisledger: balances: %w", err)
	}
	bals := make(map[string]int64, len(stored)+len(l.opening))
	maps.Copy(bals, l.opening)
	for c, s := range stored {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redisledger: balances: %s: %w", c, err)
		}
		bals[c] = v
	}
	return bals, nil
}

// Balance implements mockserver.Ledger in one round trip.
func (l *Ledger) Balance(ctx context.Context, currency string) (int64, error) {
	s, err := l.rdb.HGet(ctx, l.keys.balances, currency).Result()
	if errors.Is(err, redis.Nil) {
		return mockserver.OpeningBalance(l.opening, currency), nil
	}
	if err != nil {
		return 0, fmt.Errorf("redisledger: balance: %w", err)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redisledger: balance: %s: %w", currency, err)
	}
	return v, nil
}

// Reset implements mockserver.Ledger: one DEL of the ledger's keys, atomic
// like every Redis command.
func (l *Ledger) Reset(ctx context.Context) error {
	if err := l.rdb.Del(ctx, l.keys.all()...).Err(); err != nil {
		return fmt.Errorf("redisledger: reset: %w", err)
	}
	return nil
}

package scenario

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
)

// Book is the ledger a Ledger scenario debits. Debit is called by the
// handler with the request's context, so a transactional Book can find the
// transaction the Middleware handed over (for instance with
// pgstore.TxFromContext) and write through it. Ledger calls Debit from the
// handlers of several instances at once, so an implementation must be safe
// for concurrent use.
type Book interface {
	// Debit subtracts amount from account's balance; an account not seen
	// before starts at 0.
	Debit(ctx context.Context, account string, amount int64) error
	// Balances returns the balance of every account.
	Balances(ctx context.Context) (map[string]int64, error)
}

var _ Book = (*MemBook)(nil)

// MemBook is a Book in memory. Use NewMemBook; it is safe for concurrent
// use.
type MemBook struct {
	mu       sync.Mutex
	balances map[string]int64
}

// NewMemBook returns an empty MemBook.
func NewMemBook() *MemBook {
	return &MemBook{balances: make(map[string]int64)}
}

// Debit implements Book. It refuses a non-positive amount.
func (b *MemBook) Debit(ctx context.Context, account string, amount int64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("scenario: debit: %w", err)
	}
	if amount <= 0 {
		return errors.New("scenario: debit amount must be positive")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.balances[account] -= amount
	return nil
}

// Balances implements Book. The map is a copy.
func (b *MemBook) Balances(ctx context.Context) (map[string]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scenario: balances: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.balances), nil
}

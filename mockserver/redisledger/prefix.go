package redisledger

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidPrefix is returned, wrapped, by ValidatePrefix for a prefix that
// New does not accept.
var ErrInvalidPrefix = errors.New("redisledger: invalid prefix")

// ValidatePrefix reports whether New accepts prefix: any string without '{'
// or '}', which would break the hash tag that keeps a ledger in one Redis
// Cluster slot (see the package documentation). It returns an error
// wrapping ErrInvalidPrefix otherwise.
func ValidatePrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("%w: %q contains a brace", ErrInvalidPrefix, prefix)
	}
	return nil
}

// keys are the names of a ledger's keys, in the order the pay script takes
// them.
type keys struct {
	refs, payments, ids, balances string
}

func newKeys(prefix string) keys {
	base := prefix + "{" + prefix + "ledger}:"
	return keys{
		refs:     base + "refs",
		payments: base + "payments",
		ids:      base + "ids",
		balances: base + "balances",
	}
}

func (k keys) all() []string { return []string{k.refs, k.payments, k.ids, k.balances} }

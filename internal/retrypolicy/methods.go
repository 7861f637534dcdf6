package retrypolicy

import (
	"net/http"
	"slices"
)

// Methods are the methods that a client keys: a request with one of them
// and no key of its own gets a generated Idempotency-Key (WithKeyMethods of
// the root package and of saferetryablehttp).
type Methods []string

// Has reports whether method is one of m; the empty method is GET, as
// net/http reads it.
func (m Methods) Has(method string) bool {
	if method == "" {
		method = http.MethodGet
	}
	return slices.Contains(m, method)
}

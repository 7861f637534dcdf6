package saferetryablehttp

import (
	"net/http"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/contract"
)

// attachKey puts the operation's key in r's header before its first
// attempt, on a copy of the header map so that no map shared with the
// caller is written. It returns the error of an invalid supplied key,
// which rhTransport returns instead of sending anything.
func (a *adapter) attachKey(r *http.Request) error {
	if vals, err := contract.KeyHeaderValues(r.Header); err != nil || len(vals) > 0 {
		return nil // a key was supplied, empty or not: rhTransport validates it
	}
	k, ok := saferetry.KeyFromContext(r.Context())
	switch {
	case ok:
		if err := saferetry.ValidateKey(k); err != nil {
			return err
		}
	case a.cfg.keyMethods.Has(r.Method):
		var err error
		if k, err = saferetry.NewKey(); err != nil {
			return nil // no key: the request is sent once and not retried
		}
	default:
		return nil
	}
	h := r.Header.Clone()
	if h == nil {
		h = make(http.Header, 1)
	}
	h[saferetry.HeaderIdempotencyKey] = []string{saferetry.FormatKey(k, a.cfg.structuredKey)}
	r.Header = h
	return nil
}

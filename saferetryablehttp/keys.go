package saferetryablehttp

import (
	"fmt"
	"net/http"

	"github.com/saferetry/saferetry"
	"github.com/saferetry/saferetry/internal/contract"
	"github.com/saferetry/saferetry/internal/retrypolicy"
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

// errKeyChanged is the error of a retry that is not sent because its
// header lost the key of the request's first attempt, or carries another
// or an invalid one (the caller's PrepareRetry or RequestLogHook rewrote
// it): sent, it could
// repeat an operation that may have been carried out as a new one. No
// retry cures it, and nothing of it was sent.
var errKeyChanged = fmt.Errorf("%w: the retry's Idempotency-Key is not the first attempt's", retrypolicy.ErrRefused)

// keepsKey reports whether an attempt whose first hop carries key
// (decoded, "" for none) may be sent: the first attempt's key is the
// request's, which it records, and every retry must carry it when there
// is one.
func (st *rhOp) keepsKey(key string) bool {
	if st.state.Attempt <= 1 {
		st.opKey = key
		return true
	}
	return st.opKey == "" || key == st.opKey
}

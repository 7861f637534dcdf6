package redisstore

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/headercodec"
)

// hashFields are the fields of a hash entry (an earlier version's, see
// scripts.go) that hashRead reads, in order; the hash* constants below are
// their positions in its reply.
var hashFields = [...]string{fieldState, fieldFingerprint, fieldLegacyFP, fieldToken, fieldLeaseExpiry,
	fieldStatus, fieldOversize, fieldHeader, fieldBody}

const (
	hashState = iota
	hashFingerprint
	hashLegacyFP
	hashToken
	hashLeaseExpiry
	hashStatus
	hashOversize
	hashHeader
	hashBody
	hashNow // the server time, after the fields, for an entry in progress
)

// decodeHash reads a hash entry from a script's answer: the fields as
// hashRead reads them (nil where absent), then, for an entry in progress,
// the server time in microseconds. found is false for an absent or
// released entry.
func decodeHash(list []any) (idempotency.Entry, bool, error) {
	if len(list) < len(hashFields) {
		return idempotency.Entry{}, false, errUnexpected(list)
	}
	var f [hashNow + 1]string
	var present [hashNow + 1]bool
	for i, v := range list[:min(len(list), len(f))] {
		switch v := v.(type) {
		case nil:
		case string:
			f[i], present[i] = v, true
		default:
			return idempotency.Entry{}, false, errUnexpected(list)
		}
	}
	if !present[hashState] || f[hashState] == "r" {
		return idempotency.Entry{}, false, nil
	}
	tok, err := strconv.ParseInt(f[hashToken], 10, 64)
	if err != nil {
		return idempotency.Entry{}, false, fmt.Errorf("corrupt token: %w", err)
	}
	e := idempotency.Entry{Fingerprint: f[hashLegacyFP], Token: tok}
	if present[hashFingerprint] {
		if e.Fingerprint, err = decodeFingerprint(f[hashFingerprint]); err != nil {
			return idempotency.Entry{}, false, err
		}
	}
	switch f[hashState] {
	case "p":
		e.State = idempotency.StateInProgress
		now, err := strconv.ParseInt(f[hashNow], 10, 64)
		if err != nil {
			return idempotency.Entry{}, false, fmt.Errorf("unexpected server time %q: %w", f[hashNow], err)
		}
		lx, err := strconv.ParseInt(f[hashLeaseExpiry], 10, 64)
		if err != nil {
			return idempotency.Entry{}, false, fmt.Errorf("corrupt lease expiry: %w", err)
		}
		e.LeaseRemaining = time.Duration(lx-now) * time.Microsecond
	case "c":
		e.State = idempotency.StateCompleted
		status, err := strconv.Atoi(f[hashStatus])
		if err != nil {
			return idempotency.Entry{}, false, fmt.Errorf("corrupt status: %w", err)
		}
		resp := &idempotency.Response{Status: status, Oversize: f[hashOversize] == "1"}
		if present[hashHeader] {
			if resp.Header, err = decodeHeader(f[hashHeader]); err != nil {
				return idempotency.Entry{}, false, err
			}
		}
		if present[hashBody] {
			resp.Body = []byte(f[hashBody])
		}
		e.Response = resp
	default:
		return idempotency.Entry{}, false, fmt.Errorf("corrupt state %q", f[hashState])
	}
	return e, true, nil
}

// decodeHeader reads a stored header: headercodec bytes, or the JSON that
// versions before headercodec wrote into hash entries. It is never nil.
func decodeHeader(h string) (http.Header, error) {
	var hdr http.Header
	if len(h) > 0 && h[0] == headercodec.Version {
		var err error
		if hdr, err = headercodec.DecodeString(h); err != nil {
			return nil, fmt.Errorf("corrupt header: %w", err)
		}
	} else if err := json.Unmarshal([]byte(h), &hdr); err != nil {
		return nil, fmt.Errorf("corrupt header: %w", err)
	}
	if hdr == nil {
		hdr = http.Header{}
	}
	return hdr, nil
}

package redisstore

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/headercodec"
)

// appendResponse appends resp to args as field/value pairs for the
// complete script. The header is kept byte for byte (headercodec; JSON would turn invalid
// UTF-8 into U+FFFD). A nil Header or Body leaves its field out, so nil and
// empty survive the round trip apart.
func appendResponse(args []any, resp idempotency.Response) []any {
	args = append(args, fieldStatus, resp.Status)
	if resp.Oversize {
		args = append(args, fieldOversize, "1")
	}
	if resp.Header != nil {
		args = append(args, fieldHeader, headercodec.Append(nil, resp.Header))
	}
	if resp.Body != nil {
		args = append(args, fieldBody, resp.Body)
	}
	return args
}

// Stored fingerprints. A fingerprint that ends in a hex SHA-256 (64
// lowercase hex digits, as "v1:" and the digest from
// idempotency.Fingerprint) is kept as fpDigest, then what comes before the
// digits, then the digest's 32 bytes; any other fingerprint as fpVerbatim,
// then the fingerprint. That keeps the middleware's fingerprint at 36 bytes,
// within Redis's listpack limit of 64, where its 67 characters of hex are
// not, and the first byte makes the form one to one. The Lua function
// legacy (scripts.go) is the same decoding, for old entries' fp.
const (
	fpVerbatim byte = 0
	fpDigest   byte = 1

	digestHex = 64
)

// encodeFingerprint returns the stored form of fp.
func encodeFingerprint(fp string) string {
	n := len(fp) - digestHex
	if n < 0 || !isLowerHex(fp[n:]) {
		return string(fpVerbatim) + fp
	}
	var digest [digestHex / 2]byte
	for i := range digest {
		digest[i] = unhex(fp[n+2*i])<<4 | unhex(fp[n+2*i+1])
	}
	var b strings.Builder
	b.Grow(1 + n + len(digest))
	b.WriteByte(fpDigest)
	b.WriteString(fp[:n])
	b.Write(digest[:])
	return b.String()
}

// decodeFingerprint is the inverse of encodeFingerprint.
func decodeFingerprint(stored string) (string, error) {
	switch {
	case stored == "":
	case stored[0] == fpVerbatim:
		return stored[1:], nil
	case stored[0] == fpDigest && len(stored) >= 1+digestHex/2:
		n := len(stored) - digestHex/2
		var b strings.Builder
		b.Grow(n - 1 + digestHex)
		b.WriteString(stored[1:n])
		for i := n; i < len(stored); i++ {
			b.WriteByte(hexDigits[stored[i]>>4])
			b.WriteByte(hexDigits[stored[i]&0xf])
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("corrupt fingerprint %q", stored)
}

const hexDigits = "0123456789abcdef"

// unhex is the value of a lowercase hex digit.
func unhex(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// entryFields are the fields entryRead (scripts.go) reads, in order; the
// entry* constants below are their positions in its reply.
var entryFields = [...]string{fieldState, fieldFingerprint, fieldLegacyFP, fieldToken, fieldLeaseExpiry,
	fieldStatus, fieldOversize, fieldHeader, fieldBody}

const (
	entryState = iota
	entryFingerprint
	entryLegacyFP
	entryToken
	entryLeaseExpiry
	entryStatus
	entryOversize
	entryHeader
	entryBody
	entryNow // the server time, after the fields, for an entry in progress
)

// decodeEntry reads an entry from a script's answer: the fields as
// entryRead reads them (nil where absent), then, for an entry in progress,
// the server time in microseconds. found is false for an absent or
// released entry.
func decodeEntry(res any) (idempotency.Entry, bool, error) {
	list, ok := res.([]any)
	if !ok || len(list) < len(entryFields) {
		return idempotency.Entry{}, false, errUnexpected(res)
	}
	var f [entryNow + 1]string
	var present [entryNow + 1]bool
	for i, v := range list[:min(len(list), len(f))] {
		switch v := v.(type) {
		case nil:
		case string:
			f[i], present[i] = v, true
		default:
			return idempotency.Entry{}, false, errUnexpected(res)
		}
	}
	if !present[entryState] || f[entryState] == stateReleased {
		return idempotency.Entry{}, false, nil
	}
	tok, err := strconv.ParseInt(f[entryToken], 10, 64)
	if err != nil {
		return idempotency.Entry{}, false, fmt.Errorf("corrupt token: %w", err)
	}
	e := idempotency.Entry{Fingerprint: f[entryLegacyFP], Token: tok}
	if present[entryFingerprint] {
		if e.Fingerprint, err = decodeFingerprint(f[entryFingerprint]); err != nil {
			return idempotency.Entry{}, false, err
		}
	}
	switch f[entryState] {
	case stateInProgress:
		e.State = idempotency.StateInProgress
		now, err := strconv.ParseInt(f[entryNow], 10, 64)
		if err != nil {
			return idempotency.Entry{}, false, fmt.Errorf("unexpected server time %q: %w", f[entryNow], err)
		}
		lx, err := strconv.ParseInt(f[entryLeaseExpiry], 10, 64)
		if err != nil {
			return idempotency.Entry{}, false, fmt.Errorf("corrupt lease expiry: %w", err)
		}
		e.LeaseRemaining = time.Duration(lx-now) * time.Microsecond
	case stateCompleted:
		e.State = idempotency.StateCompleted
		resp, err := decodeResponse(f[:], present[:])
		if err != nil {
			return idempotency.Entry{}, false, err
		}
		e.Response = resp
	default:
		return idempotency.Entry{}, false, fmt.Errorf("corrupt state %q", f[entryState])
	}
	return e, true, nil
}

func decodeResponse(f []string, present []bool) (*idempotency.Response, error) {
	status, err := strconv.Atoi(f[entryStatus])
	if err != nil {
		return nil, fmt.Errorf("corrupt status: %w", err)
	}
	resp := &idempotency.Response{Status: status, Oversize: f[entryOversize] == "1"}
	if present[entryHeader] {
		h := f[entryHeader]
		if len(h) > 0 && h[0] == headercodec.Version {
			hdr, err := headercodec.DecodeString(h)
			if err != nil {
				return nil, fmt.Errorf("corrupt header: %w", err)
			}
			resp.Header = hdr
		} else if err := json.Unmarshal([]byte(h), &resp.Header); err != nil { // written by an earlier version
			return nil, fmt.Errorf("corrupt header: %w", err)
		}
		if resp.Header == nil {
			resp.Header = http.Header{}
		}
	}
	if present[entryBody] {
		resp.Body = []byte(f[entryBody])
	}
	return resp, nil
}

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

// encodeResponse turns resp into field/value pairs for the complete script.
// The header is kept byte for byte (headercodec; JSON would turn invalid
// UTF-8 into U+FFFD). A nil Header or Body leaves its field out, so nil and
// empty survive the round trip apart.
func encodeResponse(resp idempotency.Response) []any {
	args := []any{fieldStatus, strconv.Itoa(resp.Status)}
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

// decodeEntry reads an entry from a script's answer: the server time in
// microseconds and the hash's HGETALL. found is false for an absent or
// released entry.
func decodeEntry(nowRaw, fieldsRaw any) (idempotency.Entry, bool, error) {
	list, ok := fieldsRaw.([]any)
	if !ok || len(list)%2 != 0 {
		return idempotency.Entry{}, false, errUnexpected(fieldsRaw)
	}
	f := make(map[string]string, len(list)/2)
	for i := 0; i < len(list); i += 2 {
		name, ok1 := list[i].(string)
		val, ok2 := list[i+1].(string)
		if !ok1 || !ok2 {
			return idempotency.Entry{}, false, errUnexpected(fieldsRaw)
		}
		f[name] = val
	}
	st, ok := f[fieldState]
	if !ok || st == stateReleased {
		return idempotency.Entry{}, false, nil
	}
	tok, err := strconv.ParseInt(f[fieldToken], 10, 64)
	if err != nil {
		return idempotency.Entry{}, false, fmt.Errorf("corrupt token: %w", err)
	}
	e := idempotency.Entry{Fingerprint: f[fieldFingerprint], Token: tok}
	switch st {
	case stateInProgress:
		e.State = idempotency.StateInProgress
		now, err := parseInt(nowRaw)
		if err != nil {
			return idempotency.Entry{}, false, err
		}
		lx, err := strconv.ParseInt(f[fieldLeaseExpiry], 10, 64)
		if err != nil {
			return idempotency.Entry{}, false, fmt.Errorf("corrupt lease expiry: %w", err)
		}
		e.LeaseRemaining = time.Duration(lx-now) * time.Microsecond
	case stateCompleted:
		e.State = idempotency.StateCompleted
		resp, err := decodeResponse(f)
		if err != nil {
			return idempotency.Entry{}, false, err
		}
		e.Response = resp
	default:
		return idempotency.Entry{}, false, fmt.Errorf("corrupt state %q", st)
	}
	return e, true, nil
}

func decodeResponse(f map[string]string) (*idempotency.Response, error) {
	status, err := strconv.Atoi(f[fieldStatus])
	if err != nil {
		return nil, fmt.Errorf("corrupt status: %w", err)
	}
	resp := &idempotency.Response{Status: status, Oversize: f[fieldOversize] == "1"}
	if h, ok := f[fieldHeader]; ok {
		if headercodec.IsEncoded([]byte(h)) {
			hdr, err := headercodec.Decode([]byte(h))
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
	if b, ok := f[fieldBody]; ok {
		resp.Body = []byte(b)
	}
	return resp, nil
}

// parseInt reads an integer that a script returned as a decimal string or a
// Redis integer.
func parseInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected number %q: %w", x, err)
		}
		return n, nil
	}
	return 0, errUnexpected(v)
}

package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/saferetry/saferetry/idempotency"
	"github.com/saferetry/saferetry/internal/headercodec"
)

// An entry is one Redis string. Its first byte is its state, its second
// the waiters' mark ('1' while a request waits for the entry to settle:
// completing or releasing it then publishes the entry's name on the
// settled channel; '0' otherwise), and the fencing token follows in
// decimal, then a comma:
//
//	in progress  p <w> <token> , <lease start> , <lease> , <fingerprint>
//	released     r <w> <token> , ...                                      (the rest as it was in progress)
//	completed    c 0 <token> , <status> , <flags> <header length> , <body length> , <header> <body> <fingerprint>
//
// The lease start is the server time of the claim or its last renewal in
// microseconds since the epoch, the lease its length in microseconds, both
// decimal; the lease lapses at their sum. The fingerprint is in its stored
// form (encodeFingerprint) and runs to the end. flags is '0' plus 1 for an
// oversize outcome, 2 when a header is stored (internal/headercodec bytes)
// and 4 when a body is, so that nil and empty survive the round trip
// apart; the lengths are decimal byte counts. The scripts (scripts.go)
// read the state, the mark, the token, the lease and the fingerprint of an
// entry in progress; only Go reads a completed one.
const (
	stateInProgress = 'p'
	stateCompleted  = 'c'
	stateReleased   = 'r'

	flagOversize = 1
	flagHeader   = 2
	flagBody     = 4
)

// completedHead returns the head of a completed entry, everything but the
// fingerprint, which the complete script appends from the entry in
// progress it completes. The header is encoded once, straight into the
// head, which is allocated once (headercodec.Len sizes it): encoded apart
// first, it cost three more allocations as it grew, and a copy. The bytes
// are returned as a string without a copy (nothing writes them after),
// for the script's arguments (see scriptArgs).
func completedHead(token int64, resp idempotency.Response) string {
	hdrLen := headerLen(resp)
	return bytesString(appendCompletedHead(make([]byte, 0, maxCompletedHead(resp, hdrLen)), token, resp, hdrLen))
}

// headerLen is the length of resp's header as the entry keeps it
// (headercodec.Len), 0 for none.
func headerLen(resp idempotency.Response) int {
	if resp.Header == nil {
		return 0
	}
	return headercodec.Len(resp.Header)
}

// maxCompletedHead is the most bytes appendCompletedHead appends for resp,
// whose header takes hdrLen bytes.
func maxCompletedHead(resp idempotency.Response, hdrLen int) int {
	return 48 + hdrLen + len(resp.Body)
}

// appendCompletedHead appends the head that completedHead returns to b;
// resp's header takes hdrLen bytes (headerLen).
func appendCompletedHead(b []byte, token int64, resp idempotency.Response, hdrLen int) []byte {
	flags := byte(0)
	if resp.Oversize {
		flags |= flagOversize
	}
	if resp.Header != nil {
		flags |= flagHeader
	}
	if resp.Body != nil {
		flags |= flagBody
	}
	b = append(b, stateCompleted, '0')
	b = strconv.AppendInt(b, token, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(resp.Status), 10)
	b = append(b, ',', '0'+flags)
	b = strconv.AppendInt(b, int64(hdrLen), 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(len(resp.Body)), 10)
	b = append(b, ',')
	if resp.Header != nil {
		b = headercodec.Append(b, resp.Header)
	}
	return append(b, resp.Body...)
}

// bytesString returns b's bytes as a string, without a copy: nothing may
// write them after. It lets the store build a script's string arguments
// with the append functions (strconv's, headercodec's) in one allocation.
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// headToken returns the token's decimal in head, a completedHead: the
// complete script's token argument, without a string of its own.
func headToken(head string) string {
	return head[2:strings.IndexByte(head, ',')]
}

// decodeEntry reads an entry from a script's answer, as claimScript and
// getScript give one: a string, a pair of an entry in progress and the
// server time in microseconds, an empty list for none, or a hash entry of
// an earlier version (decodeHash). found is false for an absent or
// released entry.
func decodeEntry(res any) (idempotency.Entry, bool, error) {
	switch v := res.(type) {
	case string:
		return decodeString(v, "")
	case []any:
		switch len(v) {
		case 0:
			return idempotency.Entry{}, false, nil
		case 2:
			s, ok := v[0].(string)
			now, ok2 := v[1].(string)
			if ok && ok2 {
				return decodeString(s, now)
			}
		default:
			return decodeHash(v)
		}
	}
	return idempotency.Entry{}, false, errUnexpected(res)
}

// decodeString reads an entry stored as a string; now is the server time
// that must come with an entry in progress.
func decodeString(v, now string) (e idempotency.Entry, found bool, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("corrupt entry %.24q: %w", v, err)
		}
	}()
	if len(v) < 2 {
		return e, false, errTruncated
	}
	state := v[0]
	r := reader{s: v[2:]}
	e.Token = r.int(',')
	switch state {
	case stateReleased:
		return idempotency.Entry{}, false, r.err
	case stateInProgress:
		e.State = idempotency.StateInProgress
		start, lease := r.int(','), r.int(',')
		if r.err != nil {
			return e, false, r.err
		}
		if e.Fingerprint, err = decodeFingerprint(r.s); err != nil {
			return e, false, err
		}
		n, nerr := strconv.ParseInt(now, 10, 64)
		if r.err == nil && nerr != nil {
			r.err = fmt.Errorf("unexpected server time %q", now)
		}
		e.LeaseRemaining = time.Duration(start+lease-n) * time.Microsecond
	case stateCompleted:
		e.State = idempotency.StateCompleted
		resp := &idempotency.Response{Status: int(r.status())}
		flags := r.byte() - '0'
		hdrLen, bodyLen := r.int(','), r.int(',')
		hdr, body := r.take(hdrLen), r.take(bodyLen)
		if r.err != nil {
			return e, false, r.err
		}
		if flags > flagOversize|flagHeader|flagBody {
			return e, false, fmt.Errorf("flags %q", '0'+flags)
		}
		resp.Oversize = flags&flagOversize != 0
		if flags&flagHeader != 0 {
			if resp.Header, err = decodeHeader(hdr); err != nil {
				return e, false, err
			}
		}
		if flags&flagBody != 0 {
			resp.Body = []byte(body)
		}
		if e.Fingerprint, err = decodeFingerprint(r.s); err != nil {
			return e, false, err
		}
		e.Response = resp
	default:
		return e, false, fmt.Errorf("state %q", state)
	}
	if r.err != nil {
		return e, false, r.err
	}
	return e, true, nil
}

var errTruncated = errors.New("truncated")

// reader takes the fields of an entry off the front of s; the first
// malformed field sets err, and the fields after it read as zero.
type reader struct {
	s   string
	err error
}

// int reads a non-negative decimal number ended by sep.
func (r *reader) int(sep byte) int64 {
	if r.err != nil {
		return 0
	}
	i := strings.IndexByte(r.s, sep)
	if i < 0 {
		r.err = errTruncated
		return 0
	}
	n, err := strconv.ParseInt(r.s[:i], 10, 64)
	if err != nil || n < 0 {
		r.err = fmt.Errorf("number %q", r.s[:i])
		return 0
	}
	r.s = r.s[i+1:]
	return n
}

// status reads the stored status, ended by a comma: a decimal number that
// may be negative, as Complete stores any int it is given.
func (r *reader) status() int64 {
	if r.err == nil && strings.HasPrefix(r.s, "-") {
		r.s = r.s[1:]
		return -r.int(',')
	}
	return r.int(',')
}

func (r *reader) byte() byte {
	if r.err != nil || r.s == "" {
		if r.err == nil {
			r.err = errTruncated
		}
		return 0
	}
	c := r.s[0]
	r.s = r.s[1:]
	return c
}

// take reads n bytes.
func (r *reader) take(n int64) string {
	if r.err != nil || n > int64(len(r.s)) {
		if r.err == nil {
			r.err = errTruncated
		}
		return ""
	}
	s := r.s[:n]
	r.s = r.s[n:]
	return s
}

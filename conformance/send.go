package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/saferetry/saferetry/internal/contract"
)

// spec is one request to send.
type spec struct {
	method, url string
	key         string   // "" sends no Idempotency-Key
	keyLines    []string // when set, the Idempotency-Key field lines sent instead of key, as they are
	body        []byte
	principal   string      // "a", "b" or ""
	auth        http.Header // the principal's headers
}

// maxBody bounds how much of an answer is read.
const maxBody = 4 << 20

// shownHeaders are the answer headers that evidence shows: those the
// checks read.
var shownHeaders = append(contract.ReplayHeaders(), "Retry-After", contract.HeaderReplayed)

// sender sends one target's requests.
type sender struct {
	client  *http.Client
	header  http.Header // the target's
	timeout time.Duration
}

// send sends s and reads its whole answer; a transport error is in the
// Exchange's Error.
func (sd *sender) send(ctx context.Context, s spec) Exchange {
	ex := s.exchange()
	ctx, cancel := context.WithTimeout(ctx, sd.timeout)
	defer cancel()
	var body io.Reader
	if s.body != nil {
		body = bytes.NewReader(s.body)
	}
	req, err := http.NewRequestWithContext(ctx, s.method, s.url, body)
	if err != nil {
		ex.Error = err.Error()
		return ex
	}
	// Names are canonicalised as the values are copied, so that one given
	// in another case ("idempotency-key") is replaced or removed below
	// like the canonical one, instead of being sent beside it.
	addHeader(req.Header, sd.header)
	for name := range s.auth {
		req.Header.Del(name) // the principal's replace the target's
	}
	addHeader(req.Header, s.auth)
	req.Header.Del(contract.HeaderKey)
	switch {
	case s.keyLines != nil:
		req.Header[contract.HeaderKey] = s.keyLines
	case s.key != "":
		req.Header.Set(contract.HeaderKey, s.key)
	}
	if req.Header.Get("Content-Type") == "" && len(s.body) > 0 && json.Valid(s.body) {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	ex.began = start
	resp, err := sd.client.Do(req)
	if err != nil {
		ex.Error = err.Error()
		ex.Elapsed = Duration(time.Since(start))
		return ex
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	ex.sent = time.Now()
	ex.Elapsed = Duration(ex.sent.Sub(start))
	if err != nil {
		ex.Error = "reading the answer: " + err.Error()
	}
	ex.Status, ex.body, ex.header = resp.StatusCode, b, resp.Header
	ex.Body = excerpt(b)
	for _, name := range shownHeaders {
		if v := resp.Header.Values(name); len(v) > 0 {
			if ex.Header == nil {
				ex.Header = make(map[string]string)
			}
			ex.Header[name] = strings.Join(v, ", ")
		}
	}
	return ex
}

// exchange is the request part of the Exchange that records s.
func (s spec) exchange() Exchange {
	ex := Exchange{Method: s.method, URL: s.url, Key: s.key, Principal: s.principal}
	if s.keyLines != nil {
		ex.Key = strings.Join(s.keyLines, ", ")
	}
	if len(s.body) > 0 {
		ex.RequestBody = excerpt(s.body)
	}
	return ex
}

// addHeader adds the values of src to dst under their canonical names.
func addHeader(dst, src http.Header) {
	for name, vs := range src {
		for _, v := range vs {
			dst.Add(name, v)
		}
	}
}

// answered reports whether ex got a whole answer.
func (ex Exchange) answered() bool { return ex.Error == "" && ex.Status != 0 }

// success reports whether ex got a 2xx answer.
func (ex Exchange) success() bool { return ex.answered() && ex.Status >= 200 && ex.Status < 300 }

// clientError reports whether ex got a 4xx answer.
func (ex Exchange) clientError() bool { return ex.answered() && ex.Status >= 400 && ex.Status < 500 }

// replayed reports whether ex's answer is marked as a replay.
func (ex Exchange) replayed() bool { return ex.header != nil && contract.Replayed(ex.header) }

// outcome is ex's status, or "no answer", for verdicts.
func (ex Exchange) outcome() string {
	if !ex.answered() {
		return "no answer (" + ex.Error + ")"
	}
	return strconv.Itoa(ex.Status)
}

// newKey returns a fresh key for one check's requests.
func newKey(purpose string) string { return "saferetry-check-" + purpose + "-" + uuid.NewString() }

// malformedKey is a key value that is no key: an sf-string without its
// closing quote.
func malformedKey() string { return `"` + newKey("malformed") }

// malformedKeys are the malformed keys of malformed-key, each with what
// it is for verdicts: an sf-string without its closing quote, an empty
// value (which a layer may take for no key, and run unprotected), and two
// field lines (which a layer may read as their first).
func malformedKeys() []struct {
	what  string
	lines []string
} {
	return []struct {
		what  string
		lines []string
	}{
		{"an sf-string without its closing quote", []string{malformedKey()}},
		{"an empty value", []string{""}},
		{"two values", []string{newKey("malformed"), newKey("malformed")}},
	}
}

// longKey is a key one byte over contract.MaxKeyLen, printable ASCII.
func longKey() string {
	k := newKey("long")
	for len(k) < contract.MaxKeyLen+1 {
		k += "-" + uuid.NewString()
	}
	return k[:contract.MaxKeyLen+1]
}

// otherBody returns a body that asks for another operation than body: a
// JSON object with one more member, anything else with a suffix.
func otherBody(body []byte) []byte {
	marker := "saferetry-check-" + uuid.NewString()
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) == nil && obj != nil {
		trimmed := bytes.TrimSpace(body)
		inner := bytes.TrimSpace(trimmed[1 : len(trimmed)-1])
		out := []byte(`{"saferetry_check":"` + marker + `"`)
		if len(inner) > 0 {
			out = append(append(out, ','), inner...)
		}
		return append(out, '}')
	}
	return append(append([]byte(nil), body...), " "+marker...)
}

// sameLengthBody returns a body exactly as long as body that asks for
// another operation, for a server that binds a key to its body's length
// alone: in JSON, the first significant digit of the first number's
// mantissa changed (its last digit when it has none: 0 becomes 1), so
// that the number differs as a double too, for a server that canonicalises
// numbers so (RFC 8785); else, when there is no number, the last letter or
// digit of the first string value that has one (member names are left
// alone); in anything else, its last letter or digit, else its last byte.
// A changed digit never makes a number zero or gives it a leading zero, so
// the JSON stays valid. nil when body is empty or is JSON without such a value (only
// true, false, null or empty strings, say).
func sameLengthBody(body []byte) []byte {
	if len(body) == 0 {
		return nil
	}
	i := -1
	if json.Valid(body) {
		i = jsonValueByte(body)
	} else {
		i = bytes.LastIndexFunc(body, func(r rune) bool { return r < 0x80 && isAlnum(byte(r)) })
		if i < 0 {
			i = len(body) - 1
		}
	}
	if i < 0 {
		return nil
	}
	out := bytes.Clone(body)
	switch c := out[i]; {
	case c == '9' || c == 'z' || c == 'Z':
		out[i] = c - 1
	case isAlnum(c):
		out[i] = c + 1
	default:
		out[i] = c ^ 1
	}
	if json.Valid(body) && !json.Valid(out) {
		return nil // not reached: a digit or a letter of a string value changed
	}
	return out
}

// jsonValueByte returns the index in the valid JSON b of the byte that
// sameLengthBody changes: the first significant digit of the first
// number's mantissa (its last digit when all are zeros),
// else the last letter or digit of the first string value that has one,
// outside escape sequences; -1 when there is none.
func jsonValueByte(b []byte) int {
	str := -1
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			last, j := -1, i+1
			for ; j < len(b) && b[j] != '"'; j++ {
				switch {
				case b[j] == '\\':
					j++ // the escaped byte
					if j < len(b) && b[j] == 'u' {
						j += 4 // its hex digits
					}
				case isAlnum(b[j]):
					last = j
				}
			}
			i = j // the closing quote
			k := j + 1
			for k < len(b) && (b[k] == ' ' || b[k] == '\t' || b[k] == '\n' || b[k] == '\r') {
				k++
			}
			isName := k < len(b) && b[k] == ':'
			if !isName && str < 0 {
				str = last
			}
		case c == '-' || ('0' <= c && c <= '9'):
			last := -1
			for ; i < len(b) && (b[i] == '-' || b[i] == '.' || ('0' <= b[i] && b[i] <= '9')); i++ {
				if b[i] >= '1' && b[i] <= '9' {
					// The first significant digit: changing it changes
					// the value by a tenth or more, which a double
					// keeps, where a last digit may lie past the 17
					// significant digits of one.
					return i
				}
				if b[i] == '0' {
					last = i
				}
			}
			return last // all zeros; an exponent, if any, follows the mantissa and is left alone
		}
	}
	return str
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

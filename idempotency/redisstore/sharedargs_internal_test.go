package redisstore

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/saferetry/saferetry/idempotency"
)

// sharedArgsResponses are answers whose heads reach every width
// maxCompletedHead allows for, and past it (a status of math.MinInt).
var sharedArgsResponses = []idempotency.Response{
	{Status: 200},
	{Status: 0, Body: []byte{}},
	{Status: -1, Header: http.Header{}, Oversize: true},
	{Status: math.MinInt, Body: []byte("x")},
	{Status: math.MaxInt, Header: http.Header{"A": {strings.Repeat("v", 1000)}}, Body: []byte(strings.Repeat("b", 12345))},
}

var sharedArgsTokens = []int64{0, 1, 9, 10, 99, 100, 1 << 53, 1796692474042333, math.MaxInt64 - 1, math.MaxInt64, -1, math.MinInt64}

// TestHeadTokenIsTheTokensDecimal: the complete script's token argument,
// taken from the head's digits, is the token's decimal, as strconv (and
// go-redis, for an int64) writes it, for every width of token and of the
// status after it. A regression guard: it passes on the commit it came
// with.
func TestHeadTokenIsTheTokensDecimal(t *testing.T) {
	for _, tok := range sharedArgsTokens {
		for _, resp := range sharedArgsResponses {
			if got, want := headToken(completedHead(tok, resp)), strconv.FormatInt(tok, 10); got != want {
				t.Errorf("token %d, status %d: headToken = %q, want %q", tok, resp.Status, got, want)
			}
		}
	}
}

// TestKeyAndIsTheNameAndTheArgument: the entry's name and the argument
// that keyAnd makes in one allocation are what redisKey and the argument's
// own function make apart, for prefixes and scopes of every digit width,
// also when the argument outgrows the room keyAnd was given (0 bytes, or
// a head past maxCompletedHead). Neither shares bytes with the caller's
// response: writing its body after leaves them as they were. A regression
// guard: it passes on the commit it came with.
func TestKeyAndIsTheNameAndTheArgument(t *testing.T) {
	for _, prefix := range []string{"", DefaultPrefix, strings.Repeat("p", 300)} {
		s := &Store{cfg: config{prefix: prefix}}
		for _, scope := range []string{"", "s", strings.Repeat("s", 9), strings.Repeat("s", 10), strings.Repeat("s", 100)} {
			k := idempotency.Key{Scope: scope, Key: "key-" + strconv.Itoa(len(scope))}
			for _, fp := range []string{"", "fp", "v1:" + strings.Repeat("0a", 32), "v1:" + strings.Repeat("zz", 32)} {
				for _, room := range []int{0, maxStoredFingerprint(fp)} {
					name, stored := s.keyAnd(k, room, func(b []byte) []byte { return appendFingerprint(b, fp) })
					if name != s.redisKey(k) || stored != encodeFingerprint(fp) {
						t.Errorf("prefix %d, scope %q, fingerprint %q, room %d: keyAnd = %q, %q", len(prefix), scope, fp, room, name, stored)
					}
				}
			}
			for _, tok := range sharedArgsTokens {
				for _, resp := range sharedArgsResponses {
					if resp.Body != nil {
						resp.Body = append([]byte(nil), resp.Body...)
					}
					want := completedHead(tok, resp)
					for _, room := range []int{0, maxCompletedHead(resp, headerLen(resp))} {
						hdrLen := headerLen(resp)
						name, head := s.keyAnd(k, room, func(b []byte) []byte { return appendCompletedHead(b, tok, resp, hdrLen) })
						for i := range resp.Body {
							resp.Body[i] ^= 0xff
						}
						if name != s.redisKey(k) || head != want {
							t.Fatalf("prefix %d, scope %q, token %d, status %d, room %d: keyAnd = %q, %.80q, want head %.80q",
								len(prefix), scope, tok, resp.Status, room, name, head, want)
						}
						for i := range resp.Body {
							resp.Body[i] ^= 0xff
						}
					}
				}
			}
		}
	}
}

// TestScriptCmdArgs: a script command's arguments are strings, the
// key's and ARGV's as given, for every number of ARGV up to
// maxScriptArgs, and its first key is at the key's place.
func TestScriptCmdArgs(t *testing.T) {
	sc := newScript("return 1")
	for n := 0; n <= maxScriptArgs; n++ {
		args := make([]string, n)
		for i := range args {
			args[i] = strings.Repeat(strconv.Itoa(i), i+1)
		}
		for _, byHash := range []bool{true, false} {
			cmd := sc.cmd(t.Context(), byHash, "the-key", args)
			got := cmd.Args()
			if len(got) != 4+n || got[2] != "1" || got[3] != "the-key" {
				t.Fatalf("%d ARGV: args %#v", n, got)
			}
			for i, a := range args {
				if got[4+i] != a {
					t.Errorf("%d ARGV: ARGV[%d] is %#v, want %q", n, i+1, got[4+i], a)
				}
			}
		}
	}
}

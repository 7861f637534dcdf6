package redisstore

import (
	"context"
	"strings"
	"unsafe"

	"github.com/redis/go-redis/v9"
)

// Entries are Redis strings (entry.go gives their layout): the claim of a
// new key is one SET NX PX, where a hash needed HGET, HSET and PEXPIRE.
// Earlier versions kept each entry in a hash, with the fields below; the
// scripts still read such an entry (Redis answers its GET with WRONGTYPE,
// which the scripts catch with redis.pcall) and replace it with a string
// when they claim it.
//
//	st    state: "p" in progress, "c" completed, "r" released
//	f     fingerprint of the claim, in its stored form (see encodeFingerprint)
//	fp    fingerprint as the format before f kept it, verbatim
//	tok   fencing token, decimal
//	lx    lease expiry, server time in microseconds since the epoch, decimal
//	code  stored HTTP status
//	ovs   "1" when the outcome was oversize
//	hdr   stored header, headercodec bytes (or JSON, older still)
//	body  stored body, raw bytes (absent when nil)
//	w     "1" while a request waits for the entry to settle
const (
	fieldState       = "st"
	fieldFingerprint = "f"
	fieldLegacyFP    = "fp"
	fieldToken       = "tok"
	fieldLeaseExpiry = "lx"
	fieldStatus      = "code"
	fieldOversize    = "ovs"
	fieldHeader      = "hdr"
	fieldBody        = "body"
)

// hashRead is the Lua expression that reads a hash entry of an earlier
// version: HMGET of hashFields (hash.go), in their order.
var hashRead = "redis.call('HMGET', KEYS[1], '" + strings.Join(hashFields[:], "', '") + "')"

// The scripts below are the whole of the store's server side. Each touches
// only KEYS[1], so every one is safe on Redis Cluster. They are kept to the
// few Redis calls each path needs, because each call inside a script costs
// about as much server time as the command itself, and they format a
// number only where they must, because a call of string.format costs Redis
// about what a Redis call does: a claim of a new key is TIME and SET NX; a
// claim that finds an entry adds a GET (and a SET when it acquires);
// completing is GET and SET, releasing GET and SETRANGE; Get is GET, and
// TIME only for an entry in progress. The lease is stored as its start and
// its length, both strings the script already has, so that no claim
// formats a number unless a token must follow its predecessor. The
// helpers below are code put inline rather than Lua functions: a script's
// top level runs on every call, and a local function there is a closure
// made anew each time.

// luaEffects turns on effects replication, which reading TIME before
// writing needs: the default since Redis 5; replicate_commands turns it on
// where a server was configured otherwise and is a no-op (or absent) on
// newer ones.
const luaEffects = `
if redis.replicate_commands then redis.replicate_commands() end
`

// luaClock reads the server clock into two locals: now, in microseconds
// since the epoch, as a number, and nows, the same as its decimal string,
// put together from TIME's two parts without formatting a number.
// Microseconds since the epoch stay far below 2^53, so the doubles are
// exact.
const luaClock = `
local t = redis.call('TIME')
local nows = t[1] .. string.sub('00000' .. t[2], -6)
local now = tonumber(nows)
`

// luaDecimal returns the Lua expression that formats the number expr as a
// decimal integer, for redis.call: Lua 5.1 would print a microsecond
// timestamp with %.14g and lose digits. (%.0f rather than the cheaper %d,
// which Lua 5.1 casts to a C long: 32 bits on a 32-bit build of Redis.)
func luaDecimal(expr string) string { return "string.format('%.0f', " + expr + ")" }

// luaHeldValue returns the Lua expression of an entry in progress with the
// waiters' mark, the token and the stored fingerprint given as Lua
// expressions, held from the server time nows for the lease ARGV[2]:
// every script that writes an entry in progress whole writes it so.
func luaHeldValue(mark, tok, fp string) string {
	return "'p' .. " + mark + " .. " + tok + " .. ',' .. nows .. ',' .. ARGV[2] .. ',' .. " + fp
}

// luaHeld matches an entry in progress (or released, whose layout it
// keeps) in v: string.find(v, luaHeld) answers the end of the match, the
// waiters' mark, the token, the lease start and length; the stored
// fingerprint is what follows the match.
const luaHeld = `'^[pr]([01])(%d+),(%d+),(%d+),'`

// luaLegacy defines legacy, which turns a stored fingerprint (ARGV) into
// the verbatim form of field fp, to compare it with a hash entry's fp:
// decodeFingerprint (fingerprint.go) written once more in Lua, for that rare
// comparison only.
const luaLegacy = `
local function legacy(f)
  if string.byte(f, 1) ~= 1 then return string.sub(f, 2) end
  return string.sub(f, 2, -33) .. string.gsub(string.sub(f, -32), '.', function(c)
    return string.format('%02x', string.byte(c))
  end)
end
`

// luaHash reads a hash entry of an earlier version in a claim (its GET
// answered the error v): a completed one is answered as hashRead reads it;
// one in progress too, with the server time after it, unless it can be
// taken over (same fingerprint, lapsed lease), which sets took, prev and
// w; a released one sets prev. The hash is then deleted, for the claim's
// SET to write the entry anew.
var luaHash = `
local st = redis.call('HGET', KEYS[1], 'st')
if st == 'c' then return ` + hashRead + ` end
if st == 'p' then
  local h = ` + hashRead + `
  local same
  if h[2] then
    same = h[2] == ARGV[1]
  else` + luaLegacy + `
    same = h[3] and h[3] == legacy(ARGV[1])
  end
  if not same or (tonumber(h[5]) or 0) > now then
    h[#h + 1] = nows
    return h
  end
  prev, took = tonumber(h[4]), true
  if redis.call('HGET', KEYS[1], 'w') then w = '1' end
elseif st then
  prev = tonumber(redis.call('HGET', KEYS[1], 'tok'))
end
if set then return set end
redis.call('DEL', KEYS[1])
`

// claimScript: KEYS[1] entry; ARGV stored fingerprint, lease (µs), ttl
// (ms). Returns the new token when it acquired the claim, negated when it
// took an entry in progress over; otherwise the entry: a completed one as
// stored, one in progress as a pair of the entry and the server time (µs,
// decimal); a hash of an earlier version as hashRead reads it, followed by
// the server time for one in progress. An absent or released entry is
// acquired anew whatever its fingerprint; an entry in progress is taken
// over only with the same fingerprint and a lapsed lease, keeping its
// waiters' mark. The new token exceeds the previous one and is at least
// the server time in microseconds, so tokens keep growing across expiry
// too. A Lua number is sent as a Redis integer without formatting,
// exactly. An entry this store could not have written is replaced. The
// SET NX is a pcall: a Redis over maxmemory under noeviction refuses it
// (OOM) whether or not the key exists, and a claim that needs no write (a
// completed entry, one in progress that is not taken over) is then still
// answered, as the replay fast path's GET answers it; one that must write
// answers that refusal before it writes anything (a hash entry's DEL
// included, which Redis would allow, and which would lose its token).
var claimScript = newScript(luaEffects + luaClock + `
local set = redis.pcall('SET', KEYS[1], ` + luaHeldValue("'0'", "nows", "ARGV[1]") + `, 'NX', 'PX', ARGV[3])
if set and not set.err then return now end
local v = redis.pcall('GET', KEYS[1])
local prev, took, w
if type(v) == 'table' then` + luaHash + `
elseif v then
  local st = string.sub(v, 1, 1)
  if st == 'c' then return v end
  local _, e, mark, tok, start, lease = string.find(v, ` + luaHeld + `)
  if e and st == 'p' then
    if string.sub(v, e + 1) ~= ARGV[1] or tonumber(start) + tonumber(lease) > now then
      return {v, nows}
    end
    took, w = true, mark
  end
  if e then prev = tonumber(tok) end
end
if set then return set end
local tok, toks = now, nows
if prev and prev + 1 > now then tok = prev + 1; toks = ` + luaDecimal("tok") + ` end
redis.call('SET', KEYS[1], ` + luaHeldValue("(w or '0')", "toks", "ARGV[1]") + `, 'PX', ARGV[3])
if took then return -tok end
return tok
`)

// luaHolds reads the entry in progress that ARGV[1], a token, holds: it
// returns 0 from the script unless there is one, and leaves in locals the
// fields of its luaHeld match.
var luaHolds = `
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'string' or string.sub(v, 1, 1) ~= 'p' then return 0 end
local _, e, w, tok, start, lease = string.find(v, ` + luaHeld + `)
if tok ~= ARGV[1] then return 0 end
`

// renewScript: KEYS[1] entry; ARGV token, lease (µs). Returns 1 when renewed,
// 0 when the token is not the current claim of an entry in progress. The key
// is kept at least until the end of the new lease: a holder that outlives
// the ttl while renewing must not see its claim expire and a duplicate
// acquire the key anew. A renewal of the same lease length overwrites the
// lease start in place (SETRANGE keeps the expiry, and nothing is
// formatted unless the expiry must grow); another length rewrites the
// entry.
var renewScript = settleScript(luaEffects + luaHolds + luaClock + `
local ms = math.ceil(tonumber(ARGV[2]) / 1000)
local ttl = redis.call('PTTL', KEYS[1])
if #nows == #start and lease == ARGV[2] then
  redis.call('SETRANGE', KEYS[1], 3 + #tok, nows)
  if ttl < ms then redis.call('PEXPIRE', KEYS[1], ` + luaDecimal("ms") + `) end
else
  redis.call('SET', KEYS[1], ` + luaHeldValue("w", "tok", "string.sub(v, e + 1)") + `, 'PX', ` + luaDecimal("math.max(ttl, ms)") + `)
end
return 1
`)

// completeScript: KEYS[1] entry; ARGV token, ttl (ms), settled channel,
// the head of the completed entry (completedHead), to which it appends the
// claim's fingerprint. Returns 1 when stored, 0 when stale, and 2 when the
// entry is already this completion (the same token and answer: a Complete
// sent again, after an answer lost or, under WithWait, not acknowledged by
// enough replicas). Then it writes the entry's first byte again as it is
// (SETRANGE keeps the expiry, on every Redis version this store supports),
// a write that replicas acknowledge after the completion itself, so that
// WAIT checks its replication anew: otherwise the resend would write
// nothing, WAIT would have nothing to wait for, and a completion that no
// replica holds would pass for settled.
var completeScript = settleScript(`
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'string' then return 0 end
if string.sub(v, 1, 1) ~= 'p' then
  if string.sub(v, 1, #ARGV[4]) ~= ARGV[4] then return 0 end
  redis.call('SETRANGE', KEYS[1], 0, 'c')
  return 2
end
local _, e, w, tok, start, lease = string.find(v, ` + luaHeld + `)
if tok ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[4] .. string.sub(v, e + 1), 'PX', ARGV[2])
if w == '1' then redis.call('PUBLISH', ARGV[3], KEYS[1]) end
return 1
`)

// releaseScript: KEYS[1] entry; ARGV token, settled channel. The entry
// stays, marked released and keeping its token, until its expiry, so the
// next claim's token is greater. Returns 1 when released, 0 when stale,
// and 2 when the entry is already released by this token (a Release sent
// again, after an answer lost or, under WithWait, not acknowledged by
// enough replicas). Then, as completeScript does for a completion sent
// again, it writes the entry's first byte again as it is, so that WAIT
// checks the release's replication anew: otherwise the resend would write
// nothing, and a release that no replica holds (a failover would bring
// the claim back, every retry answered "in progress" until its lease
// lapsed) would pass for settled.
var releaseScript = settleScript(`
local v = redis.pcall('GET', KEYS[1])
if type(v) ~= 'string' then return 0 end
local _, e, w, tok = string.find(v, ` + luaHeld + `)
if tok ~= ARGV[1] then return 0 end
redis.call('SETRANGE', KEYS[1], 0, 'r')
if string.sub(v, 1, 1) == 'r' then return 2 end
if w == '1' then redis.call('PUBLISH', ARGV[2], KEYS[1]) end
return 1
`)

// settled is a script that settles a claim already held (renew, complete,
// release), in two forms: oom, flagged allow-oom, which Redis runs even
// while it is over maxmemory (under noeviction it refuses every other
// script that writes), and plain, for a server older than Redis 7, which
// does not know the flags and refuses the oom form as a Lua syntax error.
// A held claim that cannot settle while Redis is full would stay in
// progress until its lease lapsed, and the retry after that would run the
// handler again: settling costs Redis little memory (the entry exists; a
// completion adds its answer, at most what the Middleware buffers for the
// requests in flight), and claims, which add entries, are still refused.
type settled struct{ oom, plain *script }

func settleScript(src string) settled {
	return settled{oom: newScript("#!lua flags=allow-oom\n" + src), plain: newScript(src)}
}

// script is one of the store's Lua scripts: its SHA-1 (as go-redis's
// Script computes it) and its source, each boxed once, for the
// arguments of the EVALSHA and EVAL commands that cmd makes. go-redis's
// Script.Run boxed both anew on every call, and copied the command's
// arguments into a slice of its own after the caller's.
type script struct{ sha, src any }

func newScript(src string) *script {
	return &script{sha: redis.NewScript(src).Hash(), src: src}
}

// cmd returns the command that runs sc on key with args (the script's
// ARGV): EVALSHA, or EVAL when byHash is false, made as go-redis's Eval
// and EvalSha make it (the key where a cluster client looks for it), its
// arguments in one slice, which shares an allocation with the strings
// (see scriptArgs). args are at most maxScriptArgs.
func (sc *script) cmd(ctx context.Context, byHash bool, key string, args []string) *redis.Cmd {
	sa := new(scriptArgs)
	a := sa.a[:4+len(args)]
	a[0], a[1] = "evalsha", sc.sha
	if !byHash {
		a[0], a[1] = "eval", sc.src
	}
	sa.key = key
	a[2], a[3] = "1", stringArg(&sa.key) // numkeys as a string: go-redis formats an int on every call
	for i := range args {
		sa.args[i] = args[i]
		a[4+i] = stringArg(&sa.args[i])
	}
	cmd := redis.NewCmd(ctx, a...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// maxScriptArgs is the most ARGV any of the store's scripts takes (the
// complete script's four).
const maxScriptArgs = 4

// scriptArgs is the arguments of one script command, and the strings of
// its key and ARGV, in one allocation: each string goes in as an interface
// value that holds the string kept here (stringArg), where each string
// boxed cost an allocation of its own (a first execution four). They are
// strings, not *string, which go-redis writes and hashes alike but which a
// hook sees as a pointer, in cmd.Args() and in cmd.String() (a tracing
// hook's statement): its address. Nothing writes them once set.
type scriptArgs struct {
	a    [4 + maxScriptArgs]any
	key  string
	args [maxScriptArgs]string
}

// stringArg returns the string *p as an interface value, as any(*p) does,
// without the copy that any(*p) allocates: the value's data word points to
// *p itself, which must never be written again. An interface holding a
// string is a pointer to the string's header beside the string type's
// descriptor, whatever memory the header lies in.
func stringArg(p *string) any {
	e := eface{typ: stringType, data: unsafe.Pointer(p)}
	return *(*any)(unsafe.Pointer(&e))
}

// eface is the layout of an interface value with no methods, any.
type eface struct{ typ, data unsafe.Pointer }

// stringType is the type word of an interface value that holds a string.
var stringType = func() unsafe.Pointer {
	var s any = ""
	return (*eface)(unsafe.Pointer(&s)).typ
}()

// watchScript: KEYS[1] entry. Marks an entry in progress as awaited, so
// that its completion or release publishes. Returns 1 when marked, 0 when
// the entry is not in progress. A hash of an earlier version, held by an
// instance of that version, is marked as that version did.
var watchScript = newScript(`
local st = redis.pcall('GETRANGE', KEYS[1], 0, 0)
if type(st) == 'table' then
  if redis.call('HGET', KEYS[1], 'st') ~= 'p' then return 0 end
  redis.call('HSET', KEYS[1], 'w', '1')
  return 1
end
if st ~= 'p' then return 0 end
redis.call('SETRANGE', KEYS[1], 1, '1')
return 1
`)

// getScript: KEYS[1] entry. Returns the entry as claimScript answers one
// it does not acquire, or an empty list when there is none: reading the
// server time in the same round trip gives the lease remaining by the
// server's clock.
var getScript = newScript(luaEffects + `
local v = redis.pcall('GET', KEYS[1])
if type(v) == 'table' then
  v = ` + hashRead + `
  if v[1] == 'p' then` + luaClock + `
    v[#v + 1] = nows
  end
  return v
end
if not v then return {} end
if string.sub(v, 1, 1) == 'p' then` + luaClock + `
  return {v, nows}
end
return v
`)

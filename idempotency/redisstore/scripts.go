package redisstore

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// Hash fields. Short names keep every entry small, within Redis's listpack
// limits (64 bytes a value, by default) for a small outcome, where a hash
// takes less than half the memory of a hash table.
//
//	st    state: "p" in progress, "c" completed, "r" released
//	f     fingerprint of the claim, in its stored form (see encodeFingerprint)
//	fp    fingerprint as the previous format kept it, verbatim: read, never
//	      written; a claim that takes such an entry over replaces it with f
//	tok   fencing token, decimal
//	lx    lease expiry, server time in microseconds since the epoch,
//	      decimal; left in place, unread, once the entry completed
//	code  stored HTTP status
//	ovs   "1" when the outcome was oversize
//	hdr   stored header, headercodec bytes (JSON from earlier versions is
//	      still read; absent when nil)
//	body  stored body, raw bytes (absent when nil)
//	w     "1" while a request waits for the entry to settle: completing or
//	      releasing it then publishes the entry's name on the settled
//	      channel; left in place, unread, once the entry completed
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
	fieldWatched     = "w"

	stateInProgress = "p"
	stateCompleted  = "c"
	stateReleased   = "r"
)

// entryRead is the Lua expression every script that answers with an entry
// reads it with: HMGET of entryFields (encode.go), the fields the store
// decodes, in their order. Fields by position, rather than HGETALL's names
// and values, halve the strings the reply carries.
var entryRead = "redis.call('HMGET', KEYS[1], '" + strings.Join(entryFields[:], "', '") + "')"

// The scripts below are the whole of the store's server side. Each touches
// only KEYS[1], so every one is safe on Redis Cluster. They are kept to the
// few Redis calls each path needs, because each call inside a script costs
// about as much server time as the command itself, and they format numbers
// only where they must, because Lua formats a number slowly (a call of
// string.format costs Redis about what a Redis call does): a claim of a
// new key is HGET, TIME, HSET, PEXPIRE; a claim that finds a completed
// entry (a replay) is HGET and HMGET; Get is HMGET, and TIME only for an
// entry in progress. The helpers below are code put inline rather than
// Lua functions: a script's top level runs on every call, and a local
// function there is a closure made anew each time.

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

// luaLegacy defines legacy, which turns a stored fingerprint (ARGV) into
// the form the previous format kept, to compare it with an entry's fp:
// decodeFingerprint (encode.go) written once more in Lua, for that rare
// comparison only.
const luaLegacy = `
local function legacy(f)
  if string.byte(f, 1) ~= 1 then return string.sub(f, 2) end
  return string.sub(f, 2, -33) .. string.gsub(string.sub(f, -32), '.', function(c)
    return string.format('%02x', string.byte(c))
  end)
end
`

// claimScript: KEYS[1] entry; ARGV stored fingerprint, lease (µs), ttl (ms).
// Returns the new token when it acquired the claim, negated when it took
// an entry in progress over; otherwise the entry as entryRead reads it,
// followed for an entry in progress by the server time (µs, decimal). An
// absent or released entry is acquired anew whatever its fingerprint; an
// entry in progress is taken over only with the same fingerprint and a
// lapsed lease. The new token exceeds the previous one and is at least the
// server time in microseconds, so tokens keep growing across expiry too.
// A Lua number is sent as a Redis integer without formatting, exactly.
//
// The state alone is read first (HGET), the entry only when there is one:
// the claim of a new key, which finds none, then reads one field, not
// nine. An entry acquired anew holds st and tok at most (release leaves no
// more), and one taken over holds the fields written here and w, which
// stays: no DEL is needed. An entry in a state this store never writes is
// wiped.
var claimScript = redis.NewScript(luaEffects + `
local st = redis.call('HGET', KEYS[1], 'st')
if st == 'c' then return ` + entryRead + ` end
local prev
` + luaClock + `
if st == 'p' then
  local h = ` + entryRead + `
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
  if h[3] then redis.call('HDEL', KEYS[1], 'fp') end
  prev = tonumber(h[4])
elseif st then
  prev = tonumber(redis.call('HGET', KEYS[1], 'tok'))
  if st ~= 'r' then redis.call('DEL', KEYS[1]) end
end
local tok, toks = now, nows
if prev and prev + 1 > now then tok = prev + 1; toks = ` + luaDecimal("tok") + ` end
redis.call('HSET', KEYS[1], 'st', 'p', 'f', ARGV[1], 'tok', toks, 'lx', ` + luaDecimal("now + tonumber(ARGV[2])") + `)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if st == 'p' then return -tok end
return tok
`)

// renewScript: KEYS[1] entry; ARGV token, lease (µs). Returns 1 when renewed,
// 0 when the token is not the current claim of an entry in progress. The key
// is kept at least until the end of the new lease: a holder that outlives
// the ttl while renewing must not see its claim expire and a duplicate
// acquire the key anew.
var renewScript = redis.NewScript(luaEffects + `
local h = redis.call('HMGET', KEYS[1], 'st', 'tok')
if h[1] ~= 'p' or h[2] ~= ARGV[1] then return 0 end
` + luaClock + `
redis.call('HSET', KEYS[1], 'lx', ` + luaDecimal("now + tonumber(ARGV[2])") + `)
local ms = math.ceil(tonumber(ARGV[2]) / 1000)
if redis.call('PTTL', KEYS[1]) < ms then redis.call('PEXPIRE', KEYS[1], ` + luaDecimal("ms") + `) end
return 1
`)

// completeScript: KEYS[1] entry; ARGV token, ttl (ms), settled channel,
// then field/value pairs of the outcome. Returns 1 when stored, 0 when
// stale. lx and w stay: nothing reads them in a completed entry, and
// deleting them would cost a call.
var completeScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'st', 'tok', 'w')
if h[1] ~= 'p' or h[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'st', 'c', unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if h[3] then redis.call('PUBLISH', ARGV[3], KEYS[1]) end
return 1
`)

// releaseScript: KEYS[1] entry; ARGV token, settled channel. The hash
// stays, marked released and keeping its token, until its expiry, so the
// next claim's token is greater. Returns 1 when released, 0 when stale.
var releaseScript = redis.NewScript(`
local h = redis.call('HMGET', KEYS[1], 'st', 'tok', 'w')
if h[1] ~= 'p' or h[2] ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'f', 'fp', 'lx', 'w')
redis.call('HSET', KEYS[1], 'st', 'r')
if h[3] then redis.call('PUBLISH', ARGV[2], KEYS[1]) end
return 1
`)

// watchScript: KEYS[1] entry. Marks an entry in progress as awaited, so
// that its completion or release publishes. Returns 1 when marked, 0 when
// the entry is not in progress.
var watchScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'st') ~= 'p' then return 0 end
redis.call('HSET', KEYS[1], 'w', '1')
return 1
`)

// getScript: KEYS[1] entry. Returns the entry as entryRead reads it,
// followed for an entry in progress by the server time (µs, decimal):
// reading it in the same round trip gives the lease remaining by the
// server's clock.
var getScript = redis.NewScript(luaEffects + `
local h = ` + entryRead + `
if h[1] == 'p' then` + luaClock + `
  h[#h + 1] = nows
end
return h
`)

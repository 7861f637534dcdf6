package redisstore

import "github.com/redis/go-redis/v9"

// Hash fields. Short names keep every entry small; the values are strings.
//
//	st    state: "p" in progress, "c" completed, "r" released
//	fp    fingerprint of the claim
//	tok   fencing token, decimal
//	lx    lease expiry, server time in microseconds since the epoch, decimal
//	code  stored HTTP status
//	ovs   "1" when the outcome was oversize
//	hdr   stored header, headercodec bytes (JSON from earlier versions is
//	      still read; absent when nil)
//	body  stored body, raw bytes (absent when nil)
//	w     "1" while a request waits for the entry to settle: completing or
//	      releasing it then publishes the entry's name on the settled channel
const (
	fieldState       = "st"
	fieldFingerprint = "fp"
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

// luaPrelude is shared by every script. Numbers are always handed to
// redis.call as strings formatted with %.0f: Lua 5.1 would print a
// microsecond timestamp with %.14g and lose digits. Microseconds since the
// epoch stay far below 2^53, so the doubles are exact.
//
// Reading TIME before writing needs effects replication, the default since
// Redis 5; replicate_commands turns it on for older servers and is a no-op
// (or absent) on newer ones.
const luaPrelude = `
if redis.replicate_commands then redis.replicate_commands() end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n) return string.format('%.0f', n) end
`

// claimScript: KEYS[1] entry; ARGV fingerprint, lease (µs), ttl (ms).
// Returns {1, tookOver, token} when acquired, {0, now, HGETALL} otherwise.
// An absent or released entry is acquired anew whatever its fingerprint; an
// entry in progress is taken over only with the same fingerprint and a lapsed
// lease. The new token exceeds the previous one and is at least the server
// time in microseconds, so tokens keep growing across expiry too.
var claimScript = redis.NewScript(luaPrelude + `
local now = now_us()
local h = redis.call('HMGET', KEYS[1], 'st', 'fp', 'tok', 'lx', 'w')
local st, fp, tok, lx = h[1], h[2], h[3], h[4]
local took = 0
if st == 'p' or st == 'c' then
  if st == 'p' and fp == ARGV[1] and (tonumber(lx) or 0) <= now then
    took = 1
  else
    return {0, fmt(now), redis.call('HGETALL', KEYS[1])}
  end
end
local newtok = now
local prev = tonumber(tok)
if prev and prev + 1 > newtok then newtok = prev + 1 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'st', 'p', 'fp', ARGV[1], 'tok', fmt(newtok), 'lx', fmt(now + tonumber(ARGV[2])))
if took == 1 and h[5] then redis.call('HSET', KEYS[1], 'w', '1') end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, took, fmt(newtok)}
`)

// renewScript: KEYS[1] entry; ARGV token, lease (µs). Returns 1 when renewed,
// 0 when the token is not the current claim of an entry in progress. The key
// is kept at least until the end of the new lease: a holder that outlives
// the ttl while renewing must not see its claim expire and a duplicate
// acquire the key anew.
var renewScript = redis.NewScript(luaPrelude + `
local h = redis.call('HMGET', KEYS[1], 'st', 'tok')
if h[1] ~= 'p' or h[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'lx', fmt(now_us() + tonumber(ARGV[2])))
local ms = math.ceil(tonumber(ARGV[2]) / 1000)
if redis.call('PTTL', KEYS[1]) < ms then redis.call('PEXPIRE', KEYS[1], fmt(ms)) end
return 1
`)

// completeScript: KEYS[1] entry; ARGV token, ttl (ms), settled channel,
// then field/value pairs of the outcome. Returns 1 when stored, 0 when
// stale.
var completeScript = redis.NewScript(luaPrelude + `
local h = redis.call('HMGET', KEYS[1], 'st', 'tok', 'w')
if h[1] ~= 'p' or h[2] ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'lx', 'w')
redis.call('HSET', KEYS[1], 'st', 'c', unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if h[3] then redis.call('PUBLISH', ARGV[3], KEYS[1]) end
return 1
`)

// releaseScript: KEYS[1] entry; ARGV token, settled channel. The hash
// stays, marked released and keeping its token, until its expiry, so the
// next claim's token is greater. Returns 1 when released, 0 when stale.
var releaseScript = redis.NewScript(luaPrelude + `
local h = redis.call('HMGET', KEYS[1], 'st', 'tok', 'w')
if h[1] ~= 'p' or h[2] ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'fp', 'lx', 'w')
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

// getScript: KEYS[1] entry. Returns {now, HGETALL}; reading the server time
// in the same round trip gives the lease remaining by the server's clock.
var getScript = redis.NewScript(luaPrelude + `
return {fmt(now_us()), redis.call('HGETALL', KEYS[1])}
`)

package redisledger

import "github.com/redis/go-redis/v9"

// Replies of payScript, in its first element.
const (
	replyPaid    = "paid"     // {"paid", json}: recorded now
	replyFound   = "found"    // {"found", json}: recorded before under the ref
	replyShort   = "short"    // {"short", balance}: insufficient funds
	replyIDTaken = "id-taken" // {"id-taken"}: another payment has the ID
)

// payScript: KEYS refs, payments, ids, balances; ARGV ref, id, currency,
// amount (decimal, > 0), opening balance (decimal), payment JSON, cutoff.
//
// The payment under the ref is found only if it was created after the
// cutoff (the new payment's Created less the keep of Ledger.Pay, in
// createdLayout) or the cutoff is empty (kept for good). Both times are in
// createdLayout, in UTC, so they compare as strings. A new payment replaces
// the lapsed one in refs; the lapsed one stays in payments and ids.
//
// Every read that could fail (a key of the wrong type, a balance that is not
// an integer) comes before the first write, because Redis does not undo the
// writes of a script that fails halfway. The balance of a currency without
// one is set only when it is debited, so a refused payment leaves no trace.
//
// Balances are compared as decimal strings and debited with HINCRBY, never
// through Lua's numbers, which are doubles and would round balances beyond
// 2^53.
var payScript = redis.NewScript(`
local function canonical(s)
  return s == '0' or string.find(s, '^%-?[1-9]%d*$') ~= nil
end
-- less reports a < b for canonical decimal integers.
local function less(a, b)
  local na, nb = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if na ~= nb then return na end
  if na then a, b = string.sub(b, 2), string.sub(a, 2) end
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end

local prior = redis.call('HGET', KEYS[1], ARGV[1])
if prior and (ARGV[7] == '' or cjson.decode(prior)['created'] > ARGV[7]) then
  return {'found', prior}
end
redis.call('LLEN', KEYS[2]) -- fails now, not at RPUSH, if it is no list
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then return {'id-taken'} end
local stored = redis.call('HGET', KEYS[4], ARGV[3])
local bal = stored or ARGV[5]
if not canonical(bal) then
  return redis.error_reply('balance of ' .. ARGV[3] .. ' is not an integer: ' .. bal)
end
if less(bal, ARGV[4]) then return {'short', bal} end

if not stored then redis.call('HSET', KEYS[4], ARGV[3], bal) end
redis.call('HINCRBY', KEYS[4], ARGV[3], '-' .. ARGV[4])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[6])
redis.call('RPUSH', KEYS[2], ARGV[6])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[6])
return {'paid', ARGV[6]}
`)

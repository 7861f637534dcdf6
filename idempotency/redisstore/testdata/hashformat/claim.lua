
if redis.replicate_commands then redis.replicate_commands() end

local st = redis.call('HGET', KEYS[1], 'st')
if st == 'c' then return redis.call('HMGET', KEYS[1], 'st', 'f', 'fp', 'tok', 'lx', 'code', 'ovs', 'hdr', 'body') end
local prev

local t = redis.call('TIME')
local nows = t[1] .. string.sub('00000' .. t[2], -6)
local now = tonumber(nows)

if st == 'p' then
  local h = redis.call('HMGET', KEYS[1], 'st', 'f', 'fp', 'tok', 'lx', 'code', 'ovs', 'hdr', 'body')
  local same
  if h[2] then
    same = h[2] == ARGV[1]
  else
local function legacy(f)
  if string.byte(f, 1) ~= 1 then return string.sub(f, 2) end
  return string.sub(f, 2, -33) .. string.gsub(string.sub(f, -32), '.', function(c)
    return string.format('%02x', string.byte(c))
  end)
end

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
if prev and prev + 1 > now then tok = prev + 1; toks = string.format('%.0f', tok) end
redis.call('HSET', KEYS[1], 'st', 'p', 'f', ARGV[1], 'tok', toks, 'lx', string.format('%.0f', now + tonumber(ARGV[2])))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
if st == 'p' then return -tok end
return tok

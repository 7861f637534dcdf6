
if redis.replicate_commands then redis.replicate_commands() end

local h = redis.call('HMGET', KEYS[1], 'st', 'tok')
if h[1] ~= 'p' or h[2] ~= ARGV[1] then return 0 end

local t = redis.call('TIME')
local nows = t[1] .. string.sub('00000' .. t[2], -6)
local now = tonumber(nows)

redis.call('HSET', KEYS[1], 'lx', string.format('%.0f', now + tonumber(ARGV[2])))
local ms = math.ceil(tonumber(ARGV[2]) / 1000)
if redis.call('PTTL', KEYS[1]) < ms then redis.call('PEXPIRE', KEYS[1], string.format('%.0f', ms)) end
return 1

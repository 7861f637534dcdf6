
if redis.replicate_commands then redis.replicate_commands() end

local h = redis.call('HMGET', KEYS[1], 'st', 'f', 'fp', 'tok', 'lx', 'code', 'ovs', 'hdr', 'body')
if h[1] == 'p' then
local t = redis.call('TIME')
local nows = t[1] .. string.sub('00000' .. t[2], -6)
local now = tonumber(nows)

  h[#h + 1] = nows
end
return h

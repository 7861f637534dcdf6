
local h = redis.call('HMGET', KEYS[1], 'st', 'tok', 'w')
if h[1] ~= 'p' or h[2] ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'f', 'fp', 'lx', 'w')
redis.call('HSET', KEYS[1], 'st', 'r')
if h[3] then redis.call('PUBLISH', ARGV[2], KEYS[1]) end
return 1

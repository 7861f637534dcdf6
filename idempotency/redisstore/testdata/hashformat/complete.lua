
local h = redis.call('HMGET', KEYS[1], 'st', 'tok', 'w')
if h[1] ~= 'p' or h[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'st', 'c', unpack(ARGV, 4))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if h[3] then redis.call('PUBLISH', ARGV[3], KEYS[1]) end
return 1


if redis.call('HGET', KEYS[1], 'st') ~= 'p' then return 0 end
redis.call('HSET', KEYS[1], 'w', '1')
return 1

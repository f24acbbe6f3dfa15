-- ARGV: key, owner_token
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local r = parse(v)
if r.status ~= 'in_flight' or r.token ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
changed(ARGV[1])
return 1

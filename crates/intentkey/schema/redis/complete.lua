-- ARGV: key, owner_token, expires_at, response
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local r = parse(v)
if r.status ~= 'in_flight' or r.token ~= ARGV[2] then return 0 end
local h = header('done', r.token, r.created, r.lookups, '-', ARGV[3])
redis.call('SET', KEYS[1], h .. r.identity .. '\n' .. ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[1])
settle(ARGV[1], 'done', r.created, ARGV[3])
changed(ARGV[1])
return 1

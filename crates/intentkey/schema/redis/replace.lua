-- ARGV: key, expected_token, expected_lookups, status, owner_token, created_at, lookups,
--       next_lookup_at, expires_at, response
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local r = parse(v)
if (r.status ~= 'in_flight' and r.status ~= 'needs_reconciliation') or r.token ~= ARGV[2] or r.lookups ~= ARGV[3] then return 0 end
local h = header(ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
-- SET without KEEPTTL: the record has no TTL unless settle gives it one.
redis.call('SET', KEYS[1], h .. r.identity .. '\n' .. ARGV[10])
redis.call('ZREM', KEYS[IDX[r.status]], ARGV[1])
settle(ARGV[1], ARGV[4], ARGV[6], ARGV[9])
changed(ARGV[1])
return 1

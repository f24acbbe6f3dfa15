-- ARGV: key, status, owner_token, created_at, lookups, next_lookup_at, expires_at, identity, response
if string.find(ARGV[8], '\n', 1, true) then fail('the identity line holds a newline') end
local h = header(ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7])
if not redis.call('SET', KEYS[1], h .. ARGV[8] .. '\n' .. ARGV[9], 'NX') then
  return 0
end
-- A record Redis expired leaves index members behind: the new one replaces
-- them. Only a done record has a TTL, so they are in the done and expiry
-- indexes only.
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
settle(ARGV[1], ARGV[2], ARGV[4], ARGV[7])
return 1

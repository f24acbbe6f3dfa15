-- ARGV: now, batch, record key prefix
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local deleted = 0
local now = tonumber(ARGV[1])
for _, m in ipairs(members) do
  local rk = ARGV[3] .. m
  local v = redis.call('GET', rk)
  if not v then
    -- Redis expired it: only its index members are left.
    redis.call('ZREM', KEYS[1], m)
    redis.call('ZREM', KEYS[2], m)
  else
    local r = parse(v)
    if r.status == 'done' and r.expires ~= '-' and tonumber(r.expires) <= now then
      redis.call('DEL', rk)
      redis.call('ZREM', KEYS[1], m)
      redis.call('ZREM', KEYS[2], m)
      deleted = deleted + 1
    elseif r.status == 'done' and r.expires ~= '-' then
      redis.call('ZADD', KEYS[1], r.expires, m)
    else
      redis.call('ZREM', KEYS[1], m)
    end
  end
end
return { deleted, #members }

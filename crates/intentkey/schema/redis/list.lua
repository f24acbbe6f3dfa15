-- ARGV: status, limit, record key prefix, batch
local limit = tonumber(ARGV[2])
local batch = tonumber(ARGV[4])
local out = {}
local n = 0
local start = 0
while n < limit do
  local members = redis.call('ZRANGE', KEYS[1], start, start + batch - 1)
  if #members == 0 then break end
  for _, m in ipairs(members) do
    local v = redis.call('GET', ARGV[3] .. m)
    if v and parse(v).status == ARGV[1] then
      out[#out + 1] = m
      out[#out + 1] = v
      n = n + 1
      if n >= limit then break end
    end
  end
  start = start + batch
end
return out

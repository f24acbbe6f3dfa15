-- intentkey Redis layout ik1 (crates/intentkey/schema/redis, loaded by claim::redis)
local IDX = { in_flight = 2, done = 3, needs_reconciliation = 4 }
local function fail(msg)
  error({ err = 'ERR intentkey: ' .. msg })
end
-- A record's value: header line, identity line, response.
local function parse(v)
  local status, token, created, lookups, nxt, expires, rest =
    string.match(v, '^ik1 (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)\n(.*)$')
  if status == nil then
    fail('a record value is not in the ik1 layout: it was written by something other than intentkey')
  end
  local nl = string.find(rest, '\n', 1, true)
  if nl == nil then fail('a record value has no identity line') end
  return { status = status, token = token, created = created, lookups = lookups, nxt = nxt,
    expires = expires, identity = string.sub(rest, 1, nl - 1), response = string.sub(rest, nl + 1) }
end
local function header(status, token, created, lookups, nxt, expires)
  if IDX[status] == nil then fail('unknown status ' .. tostring(status)) end
  if not string.match(token, '^%S+$') then fail('an owner token must be non-empty, without spaces') end
  if not string.match(created, '^%-?%d+$') then fail('created_at must be an integer') end
  if not string.match(lookups, '^%d+$') then fail('lookups must be a natural number') end
  if nxt ~= '-' and not string.match(nxt, '^%-?%d+$') then fail('next_lookup_at must be an integer or -') end
  if expires ~= '-' and not string.match(expires, '^%-?%d+$') then fail('expires_at must be an integer or -') end
  return 'ik1 ' .. status .. ' ' .. token .. ' ' .. created .. ' ' .. lookups .. ' ' .. nxt .. ' ' .. expires .. '\n'
end
-- Indexes KEYS[1] (member `key`) under `status`; a done record also goes in
-- the expiry index and gets a TTL when its expiry is in the future by
-- Redis's clock. Records that are not done never get a TTL.
local function settle(key, status, created, expires)
  redis.call('ZADD', KEYS[IDX[status]], created, key)
  if status == 'done' and expires ~= '-' then
    redis.call('ZADD', KEYS[5], expires, key)
    local e = tonumber(expires)
    if e < 9000000000000 then
      local t = redis.call('TIME')
      if e * 1000 > tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then
        redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', e * 1000))
      end
    end
  end
end

-- Wakes the waiters of a record: one message, the record's key, on its
-- bucket's change channel ("<bucket>:chg", beside the expiry index KEYS[5],
-- "<bucket>:exp"; sharded pub/sub, so on a cluster it stays in the slot).
local function changed(key)
  redis.call('SPUBLISH', string.sub(KEYS[5], 1, -4) .. 'chg', key)
end

-- status.lua: counts per pool, read only.
--
-- KEYS[1] -> K.merchant_pools() (so that Redis Cluster routes the script to
--            the slot of edge's keys)
-- ARGV[1] -> number of tiers N, then N triples: name to report, tier value
--            whose pools are counted ("gold", or "merchant:<tier>" for a
--            tier the tier config declares as a merchant's pool: the pods
--            pinned to the tier itself, in its own pools, are counted with
--            them), pool type (the other merchant pools are added from
--            K.merchant_pools(), reported as "merchant:<id>")
--
-- Returns one array per pool:
--   {tier, type, assigned, available, draining, calls, ejected}
-- calls counts calls in progress: live leases on exclusive pods, live
-- per-call leases on shared pods. Cost is O(pods): it is for status pages and
-- metrics scrapes, not the call path.

local now = now_ms()
local pools, listed, i = {}, {}, 2
for _ = 1, tonumber(ARGV[1]) do
  pools[#pools + 1] = {ARGV[i], ARGV[i + 1], ARGV[i + 2]}
  listed[ARGV[i + 1]] = true
  i = i + 3
end
for _, m in ipairs(redis.call('SMEMBERS', K.merchant_pools())) do
  if not listed['merchant:' .. m] then
    pools[#pools + 1] = {'merchant:' .. m, 'merchant:' .. m, 'exclusive'}
  end
end

-- Adds the counts of tier's pools to c.
local function count(c, tier, kind)
  local avail, assigned_key = pools_of(tier)
  local members = redis.call('SMEMBERS', assigned_key)
  c.assigned = c.assigned + #members
  for _, pod in ipairs(members) do
    if is_draining(pod) then c.draining = c.draining + 1 end
    if is_ejected(pod) then c.ejected = c.ejected + 1 end
    if kind == 'shared' then
      c.calls = c.calls + live_calls(pod, now)
    elseif live_owner(pod) then
      c.calls = c.calls + 1
    end
  end
  local t = redis.call('TYPE', avail)['ok']
  if t == 'zset' then
    c.available = c.available + redis.call('ZCARD', avail)
  elseif t == 'set' then
    c.available = c.available + redis.call('SCARD', avail)
  end
end

local out = {}
for _, p in ipairs(pools) do
  local name, tier, kind = p[1], p[2], p[3]
  local c = {assigned = 0, available = 0, draining = 0, calls = 0, ejected = 0}
  count(c, tier, kind)
  if tier == 'merchant:' .. name then
    count(c, name, kind)
  end
  out[#out + 1] = {name, kind, c.assigned, c.available, c.draining, c.calls, c.ejected}
end
return out

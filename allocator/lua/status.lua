-- status.lua: counts per pool, read only.
--
-- KEYS[1] -> K.merchant_pools() (so that Redis Cluster routes the script to
--            the slot of edge's keys)
-- ARGV[1] -> number of tiers N, then N triples: name to report, tier value
--            whose pools are counted ("gold", or "merchant:<tier>" for a
--            tier the tier config declares as a merchant's pool), pool type
--            (the other merchant pools are added from K.merchant_pools(),
--            reported as "merchant:<id>")
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

local out = {}
for _, p in ipairs(pools) do
  local name, tier, kind = p[1], p[2], p[3]
  local avail, assigned_key = pools_of(tier)
  local members = redis.call('SMEMBERS', assigned_key)
  local draining, calls, ejected = 0, 0, 0
  for _, pod in ipairs(members) do
    if is_draining(pod) then draining = draining + 1 end
    if is_ejected(pod) then ejected = ejected + 1 end
    if kind == 'shared' then
      calls = calls + live_calls(pod, now)
    elseif live_owner(pod) then
      calls = calls + 1
    end
  end
  local available = 0
  local t = redis.call('TYPE', avail)['ok']
  if t == 'zset' then
    available = redis.call('ZCARD', avail)
  elseif t == 'set' then
    available = redis.call('SCARD', avail)
  end
  out[#out + 1] = {name, kind, #members, available, draining, calls, ejected}
end
return out

-- rebalance.lua: move idle pods from pools above their target to pools
-- below it (after each reconcile). A pod moves only if it is idle at this
-- instant: no live lease, no live per-call lease, not draining, not unready,
-- not pinned to its tier by the pod source;
-- busy pods wait for a later cycle. Donors give from the end of the
-- assignment order (the overflow tier first); recipients are filled in
-- assignment order.
--
-- KEYS[1] -> K.pod_metadata()
-- ARGV[1] -> fence: "", the Redis leader lock value or the Lease fence this leader holds
-- ARGV[2] -> most pods to move in this call (bounds the script's run time)
-- ARGV[3] -> N, then N x (tier name, type, target) in assignment order;
--            merchant pools (K.merchant_targets(), by id) come first
--
-- Returns {"fenced"} or {"ok", then 3 per move: pod, from tier, to tier}

if fence_lost(ARGV[1]) then
  return {'fenced'}
end
local budget = tonumber(ARGV[2])
local pools = {}
local flat = redis.call('HGETALL', K.merchant_targets())
local merchants = {}
for i = 1, #flat, 2 do
  merchants[#merchants + 1] = {flat[i], tonumber(flat[i + 1]) or 0}
end
table.sort(merchants, function(a, b) return a[1] < b[1] end)
for _, m in ipairs(merchants) do
  pools[#pools + 1] = {tier = 'merchant:' .. m[1], kind = 'exclusive', target = m[2]}
end
local n = tonumber(ARGV[3])
for i = 0, n - 1 do
  pools[#pools + 1] = {tier = ARGV[4 + 3 * i], kind = ARGV[5 + 3 * i], target = tonumber(ARGV[6 + 3 * i])}
end
for _, p in ipairs(pools) do
  p.avail, p.assigned = pools_of(p.tier)
  p.count = redis.call('SCARD', p.assigned)
end

local now = now_ms()
local function idle(pod)
  local f = redis.call('HMGET', K.pod_info(pod), 'unready', 'pinned')
  return not f[1] and not f[2] and not is_draining(pod) and not is_busy(pod, now)
end

local function move(pod, from, to)
  remove_from_pool(from.avail, pod)
  redis.call('SREM', from.assigned, pod)
  -- Idle: the calls its per-call leases or owner field still name are dead.
  redis.call('DEL', K.pod_calls(pod))
  redis.call('HSET', K.pod_info(pod), 'allocated_call_sid', '', 'allocated_at', '')
  redis.call('SET', K.pod_tier(pod), to.tier)
  redis.call('SADD', to.assigned, pod)
  local merchant = string.match(to.tier, '^merchant:(.+)$')
  if merchant then
    redis.call('SADD', K.merchant_pools(), merchant)
  end
  if to.kind == 'shared' then
    redis.call('ZADD', to.avail, 0, pod)
  else
    redis.call('SADD', to.avail, pod)
  end
  local meta = redis.call('HGET', KEYS[1], pod)
  if meta then
    meta = string.gsub(meta, '"tier":"[^"]*"', '"tier":"' .. to.tier .. '"', 1)
    redis.call('HSET', KEYS[1], pod, meta)
  end
  from.count, to.count = from.count - 1, to.count + 1
end

local out = {'ok'}
for _, to in ipairs(pools) do
  for d = #pools, 1, -1 do
    local from = pools[d]
    if budget <= 0 or to.count >= to.target then
      break
    end
    if from ~= to and from.count > from.target then
      -- Candidates: a shared pool's idle pods score 0; an exclusive pool's
      -- free pods are its available set.
      local candidates
      if from.kind == 'shared' then
        candidates = redis.call('ZRANGEBYSCORE', from.avail, 0, 0)
      else
        candidates = redis.call('SMEMBERS', from.avail)
      end
      table.sort(candidates) -- deterministic choice
      for _, pod in ipairs(candidates) do
        if budget <= 0 or to.count >= to.target or from.count <= from.target then
          break
        end
        if idle(pod) then
          move(pod, from, to)
          budget = budget - 1
          out[#out + 1] = pod
          out[#out + 1] = from.tier
          out[#out + 1] = to.tier
        end
      end
    end
  end
end
return out

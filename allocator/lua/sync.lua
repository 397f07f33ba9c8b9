-- sync.lua: make Redis agree with what the pod source says about a batch of
-- pods (the pool manager's watcher and reconciler; one round trip per batch).
-- A ready pod that edge does not know yet gets its tier here (tier
-- assignment), atomically, so two racing events cannot overshoot a target.
--
-- KEYS[1] -> K.pod_metadata()
-- ARGV[1] -> fence: "", the Lease fence or the Redis leader lock value this
--            leader holds; the batch is refused when the lock holds another
-- ARGV[2] -> ended TTL in ms (the compact marks of the dead calls it ends)
-- ARGV[3] -> overflow tier: where a new pod goes when every target is met
--            (the last tier of the default chain)
-- ARGV[4] -> N, then N x (tier name, type, target), in assignment order (the
--            default chain, then the other tiers); merchant pools come before
--            them, by id, with their targets from K.merchant_targets()
-- then M, then M x (tier name, type): the tiers of the tier config that tier
--            assignment leaves out (filled as merchants' pools), which a pod
--            pinned to one of them still joins
-- then 4 per pod: op ("ready"|"unready"), pod, tier ("" = assign one), address
-- ARGV[#ARGV] -> migration mode: the predecessor's lease in ms, else "0"; an
--            exclusive pod whose recorded call may be the predecessor's
--            live one without a lease key (lib/pods.lua's recent_owner) is busy,
--            as the sweep takes it
--
-- Returns {"fenced"} or {"ok", then 2 per pod: outcome, tier}, outcome one of
--   added | moved | unchanged   ready pod is in its tier's pools
--   busy       the pod should move (explicit tier changed, or its tier left the
--              config) but serves calls: it stays until a later sync
--   unready    taken out of its available pool, calls kept
--   unknown    unready pod that edge never registered: nothing to do
--   bad_tier   the explicit tier is not in the tier config

if fence_lost(ARGV[1]) then
  return {'fenced'}
end
local ended_ms = tonumber(ARGV[2])
local overflow = ARGV[3]
local n = tonumber(ARGV[4])
local order, kinds, targets = {}, {}, {}
for i = 0, n - 1 do
  local name = ARGV[5 + 3 * i]
  order[#order + 1] = name
  kinds[name] = ARGV[6 + 3 * i]
  targets[name] = tonumber(ARGV[7 + 3 * i])
end
local m = tonumber(ARGV[5 + 3 * n])
local pinned_kinds = {}
for name, kind in pairs(kinds) do
  pinned_kinds[name] = kind
end
for i = 0, m - 1 do
  pinned_kinds[ARGV[6 + 3 * n + 2 * i]] = ARGV[7 + 3 * n + 2 * i]
end
local first_pod = 6 + 3 * n + 2 * m
local migration_ms = tonumber(ARGV[#ARGV])

-- The type of a tier an unpinned pod may stay in: a merchant pool or a
-- tier of the assignment order (nil for any other).
local function kind_of(tier)
  if string.sub(tier, 1, 9) == 'merchant:' then
    return 'exclusive'
  end
  return kinds[tier]
end

-- The type of a tier a pinned pod may be in: also a tier of the config
-- that tier assignment leaves out, which only pinned pods join (a merchant
-- fallback may name it; a pod its source pins there is no "unknown tier").
local function pinned_kind_of(tier)
  return kind_of(tier) or pinned_kinds[tier]
end

-- Merchant pools with a target, sorted by id (deterministic), read once.
local merchants
local function merchant_pools()
  if not merchants then
    merchants = {}
    local flat = redis.call('HGETALL', K.merchant_targets())
    for i = 1, #flat, 2 do
      local t = tonumber(flat[i + 1])
      if t and t > 0 then
        merchants[#merchants + 1] = {flat[i], t}
      end
    end
    table.sort(merchants, function(a, b) return a[1] < b[1] end)
  end
  return merchants
end

-- Tier assignment: the first pool below its target, else the overflow tier.
local function choose()
  for _, m in ipairs(merchant_pools()) do
    if redis.call('SCARD', K.merchant_assigned(m[1])) < m[2] then
      return 'merchant:' .. m[1]
    end
  end
  for _, name in ipairs(order) do
    if redis.call('SCARD', K.pool_assigned(name)) < targets[name] then
      return name
    end
  end
  return overflow
end

-- A dead call (no live lease) whose info still names the pod it loses is
-- ended as the sweep ends it: call info deleted, tombstone written for what
-- remained of the call info's TTL. Left alone, that call info named a pod
-- the next call got (the fault suite found it after kill -9 of the leader:
-- the new leader's first reconcile runs before its first sweep).
local function end_dead_call(call_id, pod)
  if redis.call('HGET', K.call(call_id), 'pod_name') ~= pod then
    return
  end
  local ttl = redis.call('PTTL', K.call(call_id))
  if ttl <= 0 then
    ttl = 3600000
  end
  end_call_record(call_id, ended_mark_key(call_id), 'expired', ttl, ended_ms)
end

local function place(pod, tier, addr, now, pinned)
  local avail, assigned = pools_of(tier)
  local before = redis.call('HGET', KEYS[1], pod)
  if before and not string.find(before, '"address":"' .. addr .. '"', 1, true) then
    -- A new address is a new pod behind the name (a restarted Kubernetes
    -- pod, a StatefulSet's replacement whose predecessor's deletion and
    -- its own creation came as one change): neither the ejection nor the
    -- drain of the old one (its preStop's) applies to it.
    redis.call('ZREM', K.ejected(), pod)
    redis.call('HDEL', K.pod_info(pod), 'failures', 'ejected_reason', 'ejected_at')
    if is_draining(pod) then
      redis.call('DEL', K.pod_draining(pod))
      if redis.call('HGET', K.pod_info(pod), 'status') == 'draining' then
        redis.call('HSET', K.pod_info(pod), 'status', 'available')
      end
    end
  end
  redis.call('SET', K.pod_tier(pod), tier)
  redis.call('HSET', KEYS[1], pod,
    '{"name":"' .. pod .. '","tier":"' .. tier .. '","address":"' .. addr .. '"}')
  redis.call('SADD', assigned, pod)
  local merchant = string.match(tier, '^merchant:(.+)$')
  if merchant then
    redis.call('SADD', K.merchant_pools(), merchant)
  end
  redis.call('HSETNX', K.pod_info(pod), 'status', 'available')
  redis.call('HDEL', K.pod_info(pod), 'unready')
  -- A pinned pod (explicit tier) is never moved by rebalancing.
  if pinned then
    redis.call('HSET', K.pod_info(pod), 'pinned', '1')
  else
    redis.call('HDEL', K.pod_info(pod), 'pinned')
  end
  if not is_draining(pod) then
    if pinned_kind_of(tier) == 'shared' then
      redis.call('ZADD', avail, 'NX', live_calls(pod, now), pod)
    elseif not live_owner(pod) and not recent_owner(pod, now, migration_ms) then
      redis.call('SADD', avail, pod)
      -- Free for new calls, so a dead call's late release must be stale.
      local owner = redis.call('HGET', K.pod_info(pod), 'allocated_call_sid') or ''
      if owner ~= '' then
        redis.call('HSET', K.pod_info(pod), 'status', 'available', 'allocated_call_sid', '', 'allocated_at', '')
        end_dead_call(owner, pod)
      end
    end
  end
end

local now = now_ms()
local out = {'ok'}
for i = first_pod, #ARGV - 1, 4 do
  local op, pod, want, addr = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local prev = redis.call('GET', K.pod_tier(pod))
  -- A pod stays in its tier if that is a tier it may be in: pinned there,
  -- or (unpinned) one tier assignment fills.
  local stays = prev and (want == '' and kind_of(prev) or want == prev and pinned_kind_of(prev))
  local outcome, tier
  if op == 'unready' then
    if prev then
      redis.call('HSET', K.pod_info(pod), 'unready', '1')
      remove_from_pool((pools_of(prev)), pod)
      outcome, tier = 'unready', prev
    else
      outcome, tier = 'unknown', ''
    end
  elseif want ~= '' and not pinned_kind_of(want) then
    outcome, tier = 'bad_tier', want
  elseif stays then
    place(pod, prev, addr, now, want ~= '')
    outcome, tier = 'unchanged', prev
  elseif prev and (is_busy(pod, now) or recent_owner(pod, now, migration_ms)) then
    outcome, tier = 'busy', prev
  else
    if prev then
      local prev_avail, prev_assigned = pools_of(prev)
      remove_from_pool(prev_avail, pod)
      redis.call('SREM', prev_assigned, pod)
      -- It is idle: any call its per-call leases or owner field still name
      -- is dead, and its late renew or release must find nothing here.
      redis.call('DEL', K.pod_calls(pod))
      redis.call('HSET', K.pod_info(pod), 'allocated_call_sid', '', 'allocated_at', '')
    end
    tier = want ~= '' and want or choose()
    place(pod, tier, addr, now, want ~= '')
    outcome = prev and 'moved' or 'added'
  end
  out[#out + 1] = outcome
  out[#out + 1] = tier
end
return out

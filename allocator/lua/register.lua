-- register.lua: make a pod a member of a tier (or merchant pool), or move an
-- idle pod to another one.
--
-- KEYS[1] -> the pod's tier key (K.pod_tier(pod))
-- ARGV[1] -> pod name
-- ARGV[2] -> tier value: a tier name or "merchant:<id>"
-- ARGV[3] -> pool type of that tier: "exclusive" or "shared"
-- ARGV[4] -> pod metadata JSON for K.pod_metadata()
--
-- Returns {"added"|"unchanged"|"moved"|"busy", previous tier or ""}.
-- "busy": the pod serves calls in another tier and stays there for now.
-- A pod that is draining or busy is registered but not made available.

local pod, tier, kind, meta = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now = now_ms()
local prev = redis.call('GET', KEYS[1])
local outcome = 'added'
if prev == tier then
  outcome = 'unchanged'
elseif prev then
  if is_busy(pod, now) then
    return {'busy', prev}
  end
  local prev_avail, prev_assigned = pools_of(prev)
  remove_from_pool(prev_avail, pod)
  redis.call('SREM', prev_assigned, pod)
  -- Idle: the calls its per-call leases or owner field still name are dead.
  redis.call('DEL', K.pod_calls(pod))
  redis.call('HSET', K.pod_info(pod), 'allocated_call_sid', '', 'allocated_at', '')
  outcome = 'moved'
end

local avail, assigned = pools_of(tier)
redis.call('SET', KEYS[1], tier)
redis.call('HSET', K.pod_metadata(), pod, meta)
redis.call('SADD', assigned, pod)
local merchant = string.match(tier, '^merchant:(.+)$')
if merchant then
  redis.call('SADD', K.merchant_pools(), merchant)
end
if redis.call('EXISTS', K.pod_info(pod)) == 0 then
  redis.call('HSET', K.pod_info(pod), 'status', 'available')
end

if not is_draining(pod) then
  if kind == 'shared' then
    -- A busy shared pod keeps taking calls up to its limit, scored by load.
    redis.call('ZADD', avail, 'NX', live_calls(pod, now), pod)
  elseif not live_owner(pod) then
    redis.call('SADD', avail, pod)
  end
end
return {outcome, prev or ''}

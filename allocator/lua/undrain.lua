-- undrain.lua: end a pod's drain, so that it takes new calls again, in one
-- step: the draining flag goes, and an idle pod goes back to its available
-- pool (a busy exclusive pod goes back when its call is released, as any
-- busy pod does). A pod that was not draining is left as it is.
--
-- KEYS[1] -> the pod's tier key (K.pod_tier(pod))
-- ARGV[1] -> pod name
-- ARGV[2..] -> the shared tiers (the others and merchant pools are exclusive)
--
-- Returns:
--   {"not_found"}
--   {"undrained", was_draining (0|1), tier, back_in_pool (0|1)}

local pod = ARGV[1]
local tier = redis.call('GET', KEYS[1])
if not tier then
  return {'not_found'}
end
local shared = false
for i = 2, #ARGV do
  if ARGV[i] == tier then shared = true end
end
local was = redis.call('DEL', K.pod_draining(pod))
local back = 0
local avail, assigned = pools_of(tier)
local now = now_ms()
-- An unready pod goes back when the pod source reports it ready (sync).
if was == 1 and not is_unready(pod) and redis.call('SISMEMBER', assigned, pod) == 1 then
  if shared then
    redis.call('ZADD', avail, 'NX', live_calls(pod, now), pod)
    back = 1
  elseif not live_owner(pod) and (redis.call('HGET', K.pod_info(pod), 'allocated_call_sid') or '') == '' then
    -- An exclusive pod naming a call without a live lease is the sweep's
    -- to recover (it ends that call first).
    redis.call('SADD', avail, pod)
    back = 1
  end
  if back == 1 and not is_busy(pod, now) then
    redis.call('HSET', K.pod_info(pod), 'status', 'available')
  end
end
if back == 1 then
  serve_waiters(now)
end
return {'undrained', was, tier, back}

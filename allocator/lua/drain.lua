-- drain.lua: take a pod out of its pool and flag it draining, in one step.
--
-- KEYS[1] -> the pod's tier key (K.pod_tier(pod))
-- ARGV[1] -> pod name
-- ARGV[2] -> draining TTL in ms
-- ARGV[3] -> "" or the start of the registered address the caller has
--            ("10.0.0.7:", "[fd00::7]:"): the drain is for that instance
--
-- Returns:
--   {"not_found"}
--   {"replaced"}: another instance is registered under the name (a
--                 StatefulSet's replacement of a force-deleted pod, whose
--                 preStop drains late): it is left as it is
--   {"drained", has_active_call (0|1), was_draining (0|1), tier}
-- A repeat drain refreshes the flag's TTL.

local pod, ttl, addr = ARGV[1], tonumber(ARGV[2]), ARGV[3] or ''
local tier = redis.call('GET', KEYS[1])
if not tier then
  return {'not_found'}
end
if addr ~= '' then
  local reg = string.match(redis.call('HGET', K.pod_metadata(), pod) or '', '"address":"([^"]*)"')
  if reg and string.sub(reg, 1, #addr) ~= addr then
    return {'replaced'}
  end
end
local avail = pools_of(tier)
remove_from_pool(avail, pod)
local was = is_draining(pod) and 1 or 0
redis.call('SET', K.pod_draining(pod), 'true', 'PX', ttl)
local active = is_busy(pod, now_ms()) and 1 or 0
if active == 0 then
  redis.call('HSET', K.pod_info(pod), 'status', 'draining')
end
return {'drained', active, was, tier}

-- reinstate.lua: a pod's health probe succeeded: it takes calls again, on
-- every replica, and its failure count starts over.
--
-- ARGV[1] -> pod
--
-- Returns {1} when the pod was ejected, {0} when it was not.

local was = redis.call('ZREM', K.ejected(), ARGV[1])
if redis.call('EXISTS', K.pod_info(ARGV[1])) == 1 then
  redis.call('HDEL', K.pod_info(ARGV[1]), 'failures', 'ejected_reason', 'ejected_at')
end
return {was}

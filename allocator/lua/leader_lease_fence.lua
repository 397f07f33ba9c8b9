-- leader_lease_fence.lua: record the fencing token of a leader elected
-- through the Kubernetes Lease, when its leadership starts. The token only
-- grows: a deposed leader whose start runs late (a long pause between
-- winning the Lease and this script) cannot take the fence back from its
-- successor.
--
-- KEYS[1] -> K.lease_fence()
-- ARGV[1] -> identity of this replica
-- ARGV[2] -> term: the Lease's leaseTransitions when this leader won it
--
-- Returns {1, fence "lease/<identity>/<term>"} when recorded, or {0, the
-- current fence} when a later term (or another holder of this term) holds it.

local fence = 'lease/' .. ARGV[1] .. '/' .. ARGV[2]
local held = redis.call('GET', KEYS[1])
if held and held ~= fence then
  local held_term = tonumber(string.match(held, '/(%d+)$') or '-1')
  if held_term >= tonumber(ARGV[2]) then
    return {0, held}
  end
end
redis.call('SET', KEYS[1], fence)
return {1, fence}

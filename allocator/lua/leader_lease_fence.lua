-- leader_lease_fence.lua: record the fencing token of a leader elected
-- through the Kubernetes Lease, when its leadership starts. The token only
-- grows: a deposed leader whose start runs late (a long pause between
-- winning the Lease and this script) cannot take the fence back from its
-- successor.
--
-- A term is ordered by the Lease object first (its creationTimestamp, whole
-- seconds), then by its leaseTransitions: a Lease that was deleted and
-- recreated restarts leaseTransitions at 0, and its terms must still be
-- newer than every term of the deleted object.
--
-- KEYS[1] -> K.lease_fence()
-- ARGV[1] -> identity of this replica
-- ARGV[2] -> the Lease's creationTimestamp, Unix seconds
-- ARGV[3] -> the Lease's UID
-- ARGV[4] -> the Lease's leaseTransitions when this leader won it
--
-- Returns {1, fence "lease/<identity>/<created>/<uid>/<transitions>"} when
-- recorded, or {0, the current fence} when a later term (or another holder
-- of this term) holds it.

local created, uid, transitions = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local fence = 'lease/' .. ARGV[1] .. '/' .. ARGV[2] .. '/' .. uid .. '/' .. ARGV[4]
local held = redis.call('GET', KEYS[1])
if held and held ~= fence then
  local hc, hu, ht = string.match(held, '/(%d+)/([^/]*)/(%d+)$')
  -- A fence of another layout (written before this one) is older.
  if hc then
    hc, ht = tonumber(hc), tonumber(ht)
    if hc > created then
      return {0, held} -- a term of a newer Lease object
    end
    -- Same object: a later holder has more transitions. Two objects created
    -- in the same second cannot be ordered (the UID is random); the newest
    -- claim wins, and a leader fenced by a late claim gives the Lease up and
    -- claims again with its next term.
    if hc == created and hu == uid and ht >= transitions then
      return {0, held}
    end
  end
end
redis.call('SET', KEYS[1], fence)
return {1, fence}

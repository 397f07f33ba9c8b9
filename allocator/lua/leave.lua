-- leave.lua: a replica that stops gracefully, its media sockets drained,
-- takes itself out of K.replicas(), so that no peer later finds it dead
-- (orphans.lua: a warning and edge_replicas_dead_total) for a stop that
-- was no death. It leaves only when nothing of it is pending: each call of
-- its K.replica_calls set has ended or had its socket admitted on another
-- replica. A call whose socket it still holds, or that it answered and
-- whose socket has not come, keeps it there for the peers' dead-replica
-- check to settle as before.
--
-- KEYS[1] -> K.replicas()
-- ARGV[1] -> the replica's name
--
-- Returns {"left", 0} or {"stays", calls pending}.

local replica = ARGV[1]
local set = K.replica_calls(replica)
local pending = 0
for _, call_id in ipairs(redis.call('SMEMBERS', set)) do
  local info = redis.call('HMGET', K.call(call_id), 'pod_name', 'socket_replica', 'media_claim')
  if info[1] and (info[2] == replica or not info[3]) then
    pending = pending + 1
  else
    redis.call('SREM', set, call_id)
  end
end
if pending > 0 then
  return {'stays', pending}
end
redis.call('DEL', set)
redis.call('ZREM', KEYS[1], replica)
return {'left', 0}

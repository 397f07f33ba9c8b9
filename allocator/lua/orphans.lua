-- orphans.lua: end the calls whose media sockets a dead replica held (kill
-- -9, a lost node), instead of waiting for their leases to run out. The
-- caller has found that these replicas hold no connection to Redis; this
-- script checks, on Redis' clock, that their heartbeat (presence.lua) is
-- older than the replica TTL too. Only then are their calls' leases cut, so
-- that the zombie sweep that follows gives the pods back at once.
--
-- KEYS[1] -> K.replicas()
-- ARGV[1] -> fence: "", the Redis leader lock value or the Lease fence
-- ARGV[2] -> replica TTL in ms
-- then    -> the candidate replicas' names
--
-- Returns {"fenced"} or {"ok", dead replicas, calls cut, then the pods whose
-- calls were cut (for the sweep), then "|", then the dead replicas' names}.

if fence_lost(ARGV[1]) then
  return {'fenced'}
end
local ttl = tonumber(ARGV[2])
local now = now_ms()
local dead, cut, pods = {}, 0, {}
for i = 3, #ARGV do
  local replica = ARGV[i]
  local seen = tonumber(redis.call('ZSCORE', KEYS[1], replica))
  if seen and seen < now - ttl then
    local set = K.replica_calls(replica)
    for _, call_id in ipairs(redis.call('SMEMBERS', set)) do
      local call_key = K.call(call_id)
      local info = redis.call('HMGET', call_key, 'pod_name', 'socket_replica', 'pool_type')
      local pod = info[1]
      if pod and info[2] == replica then
        if info[3] == 'shared' then
          redis.call('ZADD', K.pod_calls(pod), 'XX', now - 1, call_id)
        elseif redis.call('GET', K.lease(pod)) == call_id then
          redis.call('DEL', K.lease(pod))
        end
        -- The call's record says why it ended (end_call_record copies it).
        redis.call('HSET', call_key, 'socket_end', 'replica_lost', 'closed_by', 'edge')
        cut = cut + 1
        pods[#pods + 1] = pod
      end
    end
    redis.call('DEL', set)
    redis.call('ZREM', KEYS[1], replica)
    dead[#dead + 1] = replica
  end
end
local out = {'ok', #dead, cut}
for _, pod in ipairs(pods) do out[#out + 1] = pod end
out[#out + 1] = '|'
for _, r in ipairs(dead) do out[#out + 1] = r end
return out

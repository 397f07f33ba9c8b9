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
-- The calls are those whose socket the replica held, and those it answered
-- whose socket never came (answered_by, no media claim) once the replica
-- TTL has passed since the answer.
--
-- Returns {"fenced"} or {"ok", dead replicas, calls cut, then the pods whose
-- calls were cut (for the sweep), then "|", then the dead replicas' names
-- (those forgotten: none of their answered calls may still get a socket)}.

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
    local waiting = 0
    for _, call_id in ipairs(redis.call('SMEMBERS', set)) do
      local call_key = K.call(call_id)
      local info = redis.call('HMGET', call_key, 'pod_name', 'socket_replica', 'pool_type', 'media_claim',
        'answered_by', 'allocated_at')
      local pod = info[1]
      -- A call the dead replica answered whose socket has not come: its
      -- provider may still open it on a live replica for a while (the
      -- replica TTL since the answer); after that it is as dead as its
      -- replica.
      local unclaimed = pod and not info[4] and info[5] == replica
      local answered_ms = (tonumber(info[6]) or 0) * 1000
      if unclaimed and now - answered_ms < ttl then
        waiting = waiting + 1
      elseif pod and (info[2] == replica or unclaimed) then
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
      if not (unclaimed and now - answered_ms < ttl) then
        redis.call('SREM', set, call_id)
      end
    end
    -- Forgotten once nothing of it may still come; until then the next
    -- look finds it again.
    if waiting == 0 then
      redis.call('DEL', set)
      redis.call('ZREM', KEYS[1], replica)
      dead[#dead + 1] = replica
    end
  end
end
local out = {'ok', #dead, cut}
for _, pod in ipairs(pods) do out[#out + 1] = pod end
out[#out + 1] = '|'
for _, r in ipairs(dead) do out[#out + 1] = r end
return out

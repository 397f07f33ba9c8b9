-- move_call.lua: move a call off a pod it cannot use to another pod of its
-- chain, in one step: the broken pod's failure recorded (and the pod
-- ejected, see mark_failed), the call's info, lease and owner moved, its
-- media claim kept. It serves both moves the proxy makes: connect-time
-- failover (the socket could not reach its pod, nothing relayed yet;
-- proxy/failover.go, Allocator.MoveCall) and the mid-call move of a call
-- whose pod died while it streamed (proxy.resume; proxy/resume.go,
-- Allocator.ResumeCall). ARGV[9] says which.
--
-- KEYS[1] -> call info hash (K.call(call_id))
-- ARGV[1] -> call id
-- ARGV[2] -> the pod the socket failed to reach
-- ARGV[3] -> holder: the socket's media claim; only it may move the call
-- ARGV[4] -> reason ("refused", "timeout", "reset", "status", ...)
-- ARGV[5] -> lease TTL in ms
-- ARGV[6] -> ejection backoff base in ms
-- ARGV[7] -> ejection backoff max in ms
-- ARGV[8] -> max ejection percent of a tier
-- ARGV[9] -> "0" a failed connect; "1" the socket was relaying (its pod
--            died mid-call and the call resumes on the new pod: counted on
--            the call's record, resumptions and resumed_at); "2" the same,
--            of an instance the pod's name no longer stands for (a
--            replacement registered since): nothing of the pod is recorded
-- ARGV[10] -> number of tiers N, then per tier: name, type, and for a
--            shared tier max_concurrent and placement ("spread"|"pack")
-- then    -> number of default chain steps M, then M step names
-- last    -> stale after: unix ms past which the caller has given up (its
--            deadline and a margin for the clocks, "0": none): a move
--            that reaches Redis later (a pause, a partition that heals)
--            changes nothing. Read as ARGV[#ARGV].
--
-- Returns:
--   {"moved", pod, ejected (0|1), probe_due_ms}   the call is on pod now,
--                                      never one it was on before
--   {"none", ejected (0|1), probe_due_ms}   no other pod in the chain
--                                      (the pods the call left count as none): the
--                                      call stays where it is (the caller
--                                      ends it)
--   {"gone", pod}   the call is not live on ARGV[2] (ended, or moved
--                   already: pod is where, "" for nowhere)
--   {"held"}        another socket holds the call's media claim
--   {"stale"}       the caller's deadline passed before Redis ran the
--                   script (its socket gave up on the move): nothing is
--                   written
--
-- Fencing is kept: the call's pod changes only while this socket holds the
-- claim and the call is still on the broken pod, and the new pod's lease
-- and allocated_call_sid name the call, as allocate writes them. The pods
-- the call left are listed in its info (moved_from, "|a|b|"), so that the
-- media URL the provider holds, signed for the first pod, is still
-- admitted (claim.lua) and reaches the new one.

local call_key, call_id, broken, holder = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local info = redis.call('HMGET', call_key, 'pod_name', 'media_claim', 'source_pool', 'pool_type',
  'merchant_id', 'moved_from', 'pod_gone', 'edge_pod')
-- A pod that left the registry (unregister.lua handed the call to its
-- socket) has no keys left: nothing of it is recorded or freed.
local gone = info[7] ~= false and info[7] ~= nil
if info[1] ~= broken then
  return {'gone', info[1] or ''}
end
if info[2] ~= holder then
  return {'held'}
end
local now = now_ms()
if stale(ARGV[#ARGV], now) then
  return {'stale'}
end
local ejected, due = 0, 0
if not gone and ARGV[9] ~= '2' then
  ejected, due = mark_failed(broken, ARGV[4], now, tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]))
end

local tiers, default_chain = parse_tiers(10)
local chain = chain_of(info[5] or '', default_chain, tiers)
local lease_ms = tonumber(ARGV[5])
-- A move is a circuit, not a loop: the call never goes back to a pod
-- it left (one that crashed on its stream would crash again).
local moved_from = info[6] or '|'
if not string.find(moved_from, '|' .. broken .. '|', 1, true) then
  moved_from = moved_from .. broken .. '|'
end
local pod, source, kind, avail = take_from_chain(chain, tiers, moved_from)
if not pod then
  return {'none', ejected, due}
end

-- Off the broken pod, as release.lua frees it (without a tombstone: the
-- call lives on). An exclusive pod goes back to its pool even when ejected:
-- allocate skips it while it is, and the sweep would otherwise take it
-- for a zombie.
local old_tier = tier_of_source(info[3] or '')
local old_avail = pools_of(old_tier)
local state = is_draining(broken) and 'draining' or 'available'
local released_at = tostring(math.floor(now / 1000))
if gone then
  redis.call('HDEL', call_key, 'pod_gone')
elseif info[4] == 'shared' then
  redis.call('ZREM', K.pod_calls(broken), call_id)
  local score = redis.call('ZSCORE', old_avail, broken)
  if score and tonumber(score) > 0 and redis.call('GET', K.pod_tier(broken)) == old_tier then
    redis.call('ZINCRBY', old_avail, -1, broken)
  end
  if redis.call('ZCARD', K.pod_calls(broken)) == 0 then
    redis.call('DEL', K.lease(broken))
    redis.call('HSET', K.pod_info(broken), 'status', state, 'allocated_call_sid', '',
      'allocated_at', '', 'released_at', released_at)
  end
elseif redis.call('HGET', K.pod_info(broken), 'allocated_call_sid') == call_id then
  if redis.call('GET', K.lease(broken)) == call_id then
    redis.call('DEL', K.lease(broken))
  end
  if state == 'available' and not is_unready(broken) and redis.call('GET', K.pod_tier(broken)) == old_tier then
    redis.call('SADD', old_avail, broken)
  end
  redis.call('HSET', K.pod_info(broken), 'status', state, 'allocated_call_sid', '',
    'allocated_at', '', 'released_at', released_at)
end

-- A record edge alone wrote stays so (edge_pod, lib/record.lua's
-- write_allocation) on its new pod.
local fields = {'pod_name', pod, 'source_pool', source, 'pool_type', kind, 'moved_from', moved_from}
if info[8] == broken then
  fields[#fields + 1], fields[#fields + 2] = 'edge_pod', pod
end
redis.call('HSET', call_key, unpack(fields))
if ARGV[9] ~= '0' then
  redis.call('HINCRBY', call_key, 'resumptions', 1)
  redis.call('HSET', call_key, 'resumed_at', tostring(now))
end
assign(pod, call_id, source, kind, avail, lease_ms, now)
count_call(info[5], call_id, now + lease_ms) -- merchant's live calls: new lease
return {'moved', pod, ejected, due}

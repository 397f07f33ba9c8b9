-- unregister.lua: forget a pod: out of every pool, its keys deleted, and the
-- calls it served ended (their call info removed, so their releases answer
-- "not_found" and nothing returns the pod; their tombstones written, so a
-- replayed webhook gets a hangup). Those are the calls edge's records name
-- (per-call leases, the lease, the pod info) and every call the predecessor
-- lists in K.predecessor_pod_calls(pod), as its reconciler ends them when a
-- pod dies: a shared pod's lease and pod info name only its latest call. A call whose media socket may move to
-- another pod (resumable.lua: its resumable field names the socket holding
-- its claim) is handed to that socket instead: marked pod_gone, it lives
-- on, and the socket's next renewal (renew.lua) tells the socket to move
-- it (move_call.lua); the socket's end, or the call info's expiry, ends it
-- otherwise.
--
-- KEYS[1] -> the pod's tier key (K.pod_tier(pod))
-- ARGV[1] -> pod name
-- ARGV[2] -> fence: "", the Redis leader lock value or the Lease fence the caller holds; a
--            leader that lost the lock removes nothing
-- ARGV[3] -> call info TTL in ms (the tombstones')
-- ARGV[4] -> ended TTL in ms (the calls' compact marks)
--
-- Returns {"removed", tier or "", calls ended, calls handed to their socket,
-- the ended calls' ids...}, {"not_found"} or {"fenced"}.

local pod = ARGV[1]
if fence_lost(ARGV[2]) then
  return {'fenced'}
end
local tier = redis.call('GET', KEYS[1])
local known = tier or redis.call('HEXISTS', K.pod_metadata(), pod) == 1
if tier then
  local avail, assigned = pools_of(tier)
  remove_from_pool(avail, pod)
  redis.call('SREM', assigned, pod)
end

local ended, kept, ended_ids = 0, 0, {}
local function end_call(call_id)
  if not call_id or call_id == '' then
    return
  end
  local info = redis.call('HMGET', K.call(call_id), 'pod_name', 'media_claim', 'resumable', 'pod_gone')
  if info[1] ~= pod or info[4] then
    return
  end
  if info[2] and info[2] == info[3] then
    redis.call('HSET', K.call(call_id), 'pod_gone', '1')
    kept = kept + 1
    return
  end
  end_call_record(call_id, ended_mark_key(call_id), 'unregistered', tonumber(ARGV[3]), tonumber(ARGV[4]))
  ended = ended + 1
  ended_ids[#ended_ids + 1] = call_id
end
end_call(redis.call('HGET', K.pod_info(pod), 'allocated_call_sid'))
end_call(redis.call('GET', K.lease(pod)))
for _, call_id in ipairs(redis.call('ZRANGE', K.pod_calls(pod), 0, -1)) do
  end_call(call_id)
end
local pred_calls = K.predecessor_pod_calls(pod)
if redis.call('TYPE', pred_calls)['ok'] == 'set' then
  for _, call_id in ipairs(redis.call('SMEMBERS', pred_calls)) do
    end_call(call_id)
  end
end

redis.call('DEL', KEYS[1], K.pod_info(pod), K.lease(pod), K.pod_draining(pod), K.pod_calls(pod), pred_calls)
redis.call('HDEL', K.pod_metadata(), pod)
redis.call('ZREM', K.ejected(), pod)
if not known then
  return {'not_found'}
end
-- Then the calls ended, for the log line that names them.
return {'removed', tier or '', ended, kept, unpack(ended_ids)}

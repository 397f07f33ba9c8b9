-- renew.lua: extend the leases of a batch of calls, each only if the call
-- still owns its pod. One round trip for every socket of a replica.
--
-- KEYS[i] -> call info hash of the i-th call
-- ARGV[1] -> lease TTL in ms
-- ARGV[2] -> call info TTL in ms
-- ARGV[3i], ARGV[3i+1], ARGV[3i+2] -> call id, pod and media claim holder
--            of the i-th call ("" holder: no claim is checked)
--
-- Returns: one integer per call, 1 renewed, 0 the call no longer owns the pod
-- (released, swept, or its pod removed) or the holder no longer holds the
-- call's media claim: its socket should close.
--
-- Only the socket holding the claim keeps the call alive: a socket that lost
-- its claim (dropped, or never taken, e.g. admitted by an edge before claims)
-- cannot keep renewing a call whose media another socket may carry.

local lease_ms, info_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = now_ms()
local out = {}
for i, call_key in ipairs(KEYS) do
  local call_id, pod, holder = ARGV[3 * i], ARGV[3 * i + 1], ARGV[3 * i + 2]
  local info = redis.call('HMGET', call_key, 'pod_name', 'pool_type', 'media_claim', 'merchant_id')
  local ok = 0
  if info[1] == pod and (holder == '' or info[3] == holder) then
    if info[2] == 'shared' then
      if redis.call('ZSCORE', K.pod_calls(pod), call_id) then
        redis.call('ZADD', K.pod_calls(pod), 'XX', now + lease_ms, call_id)
        redis.call('SET', K.lease(pod), call_id, 'PX', lease_ms)
        ok = 1
      end
    elseif redis.call('HGET', K.pod_info(pod), 'allocated_call_sid') == call_id then
      redis.call('SET', K.lease(pod), call_id, 'PX', lease_ms)
      ok = 1
    end
    if ok == 1 and redis.call('PTTL', call_key) < info_ms then
      redis.call('PEXPIRE', call_key, info_ms)
    end
    if ok == 1 then
      count_call(info[4], call_id, now + lease_ms) -- admission (issue 10)
    end
  end
  out[i] = ok
end
return out

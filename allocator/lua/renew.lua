-- renew.lua: extend the leases of a batch of calls, each only if the call
-- still owns its pod. One round trip for every socket of a replica.
--
-- KEYS[i] -> call info hash of the i-th call
-- ARGV[1] -> lease TTL in ms
-- ARGV[2] -> call info TTL in ms
-- ARGV[1+2i], ARGV[2+2i] -> call id and pod of the i-th call
--
-- Returns: one integer per call, 1 renewed, 0 the call no longer owns the pod
-- (released, swept, or its pod removed): its socket should close.

local lease_ms, info_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = now_ms()
local out = {}
for i, call_key in ipairs(KEYS) do
  local call_id, pod = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
  local info = redis.call('HMGET', call_key, 'pod_name', 'pool_type')
  local ok = 0
  if info[1] == pod then
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
  end
  out[i] = ok
end
return out

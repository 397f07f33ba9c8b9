-- pods.lua: a pod's pools and state (draining, unready, owned, busy, ejected) and the leader's fence.

-- The pools behind a tier value ("gold" or "merchant:<id>"): available key,
-- assigned key, and the source_pool label the seeds store ("pool:gold",
-- "merchant:<id>").
local function pools_of(tier)
  if string.find(tier, 'merchant:', 1, true) == 1 and #tier > 9 then
    local merchant = string.sub(tier, 10)
    return K.merchant_pods(merchant), K.merchant_assigned(merchant), tier
  end
  return K.pool_available(tier), K.pool_assigned(tier), 'pool:' .. tier
end

-- The tier value behind a source_pool label ("pool:gold" -> "gold").
local function tier_of_source(source)
  return string.match(source, '^pool:(.+)$') or source
end

-- deferred: allocations read draining with the pod's other keys; this is for the rarer paths.
local function is_draining(pod)
  return redis.call('EXISTS', K.pod_draining(pod)) == 1
end

-- Whether the pod source reports the pod not ready: it keeps its calls but
-- takes no new one until it is ready again.
local function is_unready(pod)
  return redis.call('HGET', K.pod_info(pod), 'unready') == '1'
end

-- The call that holds an exclusive pod by a live lease, or nil. A lease whose
-- call info names another pod is a leftover and holds nothing.
local function live_owner(pod)
  local call = redis.call('GET', K.lease(pod))
  if call and redis.call('HGET', K.call(call), 'pod_name') == pod then
    return call
  end
  return nil
end

-- Whether, in migration mode (migration_ms, the predecessor's lease in
-- ms; 0 is off), the call the pod info names owns an exclusive pod even
-- without a lease key: its call info names the pod and it began less than
-- a predecessor lease ago. The predecessor's release deletes the lease key
-- of whoever holds the pod by then, so a live call may have none (the
-- sweep and the pod sync both keep its pod).
local function recent_owner(pod, now, migration_ms)
  if migration_ms <= 0 then
    return false
  end
  local call = redis.call('HGET', K.pod_info(pod), 'allocated_call_sid')
  if not call or call == '' then
    return false
  end
  local info = redis.call('HMGET', K.call(call), 'pod_name', 'allocated_at')
  local at = tonumber(info[2])
  return info[1] == pod and at ~= nil and now - at * 1000 < migration_ms
end

-- Live per-call leases on a shared pod (expired ones are the sweep's work).
local function live_calls(pod, now)
  return redis.call('ZCOUNT', K.pod_calls(pod), now, '+inf')
end

-- Whether a pod serves any call right now.
local function is_busy(pod, now)
  return live_owner(pod) ~= nil or live_calls(pod, now) > 0
end

local function remove_from_pool(key, pod)
  local t = redis.call('TYPE', key)['ok']
  if t == 'set' then
    return redis.call('SREM', key, pod)
  elseif t == 'zset' then
    return redis.call('ZREM', key, pod)
  end
  return 0
end

-- Whether a leader's fence is no longer the current one, so its pool
-- scripts must change nothing: "" is unfenced (a single replica, tests); a
-- Kubernetes Lease leader's fence ("lease/...") must be the one stored by
-- leader_lease_fence; any other is the Redis leader lock's value.
local function fence_lost(fence)
  if fence == '' then
    return false
  end
  if string.sub(fence, 1, 6) == 'lease/' then
    return redis.call('GET', K.lease_fence()) ~= fence
  end
  return redis.call('GET', K.leader_lock()) ~= fence
end

-- Whether dials to the pod failed and it is out of allocation on every
-- replica until a probe succeeds (K.ejected()).
-- deferred: read only while some pod is ejected.
local function is_ejected(pod)
  return redis.call('ZSCORE', K.ejected(), pod) ~= false
end


-- ejection.lua: a pod whose dials fail leaves allocation (Envoy's outlier detection).

-- Records a failed dial (or probe) of pod and ejects it unless its tier
-- already has max_pct percent of its pods ejected (Envoy's
-- max_ejection_percent: a network blip must not empty the pools). The
-- backoff doubles with every consecutive failure, from base_ms up to
-- max_ms. Returns ejected (0|1), the probe due time (unix ms) and the
-- failure count.
local function mark_failed(pod, reason, now, base_ms, max_ms, max_pct)
  if redis.call('EXISTS', K.pod_tier(pod)) == 0 then
    return 0, 0, 0
  end
  local info = K.pod_info(pod)
  local failures = redis.call('HINCRBY', info, 'failures', 1)
  local backoff = base_ms
  for _ = 2, failures do
    backoff = backoff * 2
    if backoff >= max_ms then break end
  end
  backoff = math.min(backoff, max_ms)
  local due = now + backoff
  if not is_ejected(pod) then
    local tier = redis.call('GET', K.pod_tier(pod))
    local _, assigned = pools_of(tier)
    local total, out = redis.call('SCARD', assigned), 1
    for _, p in ipairs(redis.call('ZRANGE', K.ejected(), 0, -1)) do
      if redis.call('GET', K.pod_tier(p)) == tier then out = out + 1 end
    end
    if out * 100 > max_pct * total then
      return 0, 0, failures
    end
    redis.call('HSET', info, 'ejected_at', tostring(now))
  end
  redis.call('HSET', info, 'ejected_reason', reason)
  redis.call('ZADD', K.ejected(), due, pod)
  return 1, due, failures
end


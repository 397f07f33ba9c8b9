-- placement.lua: the tiers and chain of an allocation and the walk that takes a pod from it.

-- The tier table and default chain of allocate's argument layout, from
-- ARGV[i]: N, then per tier its name and type, and for a shared one its
-- max_concurrent and placement ("spread"|"pack") (an exclusive tier has
-- neither: each argument costs Redis time), then M, then M step names.
local function parse_tiers(i)
  local tiers = {}
  for _ = 1, tonumber(ARGV[i]) do
    if ARGV[i + 2] == 'shared' then
      tiers[ARGV[i + 1]] = {type = 'shared', max = tonumber(ARGV[i + 3]), pack = ARGV[i + 4] == 'pack'}
      i = i + 4
    else
      tiers[ARGV[i + 1]] = {type = ARGV[i + 2], max = 0, pack = false}
      i = i + 2
    end
  end
  i = i + 1
  local default_chain = {}
  for _ = 1, tonumber(ARGV[i]) do
    i = i + 1
    default_chain[#default_chain + 1] = ARGV[i]
  end
  return tiers, default_chain, i + 1
end

-- The merchant's chain: its dedicated pool first, then its fallback, or
-- its tier and the default chain (each step once). tiers (parse_tiers) says
-- which tiers exist: a tier that does not is left out with a note (the
-- admin API refuses one; a hand-written entry may name one). The second
-- value is "" or a note for the log; the third the decoded merchant config
-- (nil when none), for admission.
local function chain_of(merchant, default_chain, tiers)
  local chain, warning = default_chain, ''
  if merchant == '' then
    return chain, warning, nil
  end
  local raw = redis.call('HGET', K.merchant_config(), merchant)
  if not raw then
    return chain, warning, nil
  end
  local ok, mc = pcall(cjson.decode, raw)
  if not ok or type(mc) ~= 'table' then
    return chain, 'merchant config of ' .. merchant .. ' is not valid JSON; using the default chain'
  end
  if type(mc.fallback) == 'table' and #mc.fallback > 0 then
    chain = {}
    for _, step in ipairs(mc.fallback) do
      if type(step) == 'string' then chain[#chain + 1] = step end
    end
  end
  local first = {}
  if type(mc.pool) == 'string' and mc.pool ~= '' then
    first[#first + 1] = 'merchant:' .. mc.pool
  end
  -- A fallback is the merchant's whole chain: its tier leads only the
  -- default chain.
  if type(mc.tier) == 'string' and mc.tier ~= '' and chain == default_chain then
    if tiers[mc.tier] then
      first[#first + 1] = mc.tier
    else
      warning = 'merchant config of ' .. merchant .. ' names tier ' .. mc.tier .. ', which is not a tier; ignored'
    end
  end
  if #first > 0 then
    local seen, led = {}, {}
    for _, list in ipairs({first, chain}) do
      for _, step in ipairs(list) do
        if not seen[step] then
          seen[step] = true
          led[#led + 1] = step
        end
      end
    end
    chain = led
  end
  return chain, warning, mc
end

-- SPOP semantics of the seeds: a draining, unready or unregistered pod
-- popped from an available set does not belong there and stays out (the pod
-- source puts an unready one back when it is ready); a pod still held by a
-- live call (a predecessor's double release) stays out until released. An
-- ejected pod, or the one excluded, goes back: it is free, only not to be
-- given now.
-- exclude is nil or a list of pod names a call must not be given, as
-- a call's moved_from keeps them ("|a|b|"): the pods it left.
local function excluded(pod, exclude)
  return exclude ~= nil and string.find(exclude, '|' .. pod .. '|', 1, true) ~= nil
end

-- no_ejected says the caller knows no pod is ejected (K.ejected() does not
-- exist): one command less per pod looked at.
local function take_exclusive(avail, exclude, no_ejected)
  local skipped = {}
  local found
  while true do
    local pod = redis.call('SPOP', avail)
    if not pod then break end
    -- Draining, registered, and its lease's call, in one read.
    local s = redis.call('MGET', K.pod_draining(pod), K.pod_tier(pod), K.lease(pod))
    local owned = s[3] and redis.call('HGET', K.call(s[3]), 'pod_name') == pod
    if not s[1] and s[2] and not owned and not is_unready(pod) then
      if not excluded(pod, exclude) and (no_ejected or not is_ejected(pod)) then
        found = pod
        break
      end
      skipped[#skipped + 1] = pod
    end
  end
  if #skipped > 0 then
    redis.call('SADD', avail, unpack(skipped))
  end
  return found
end

-- The least loaded (spread) or most loaded (pack) non-draining,
-- ready, not ejected pod below max_concurrent.
local function take_shared(avail, max, exclude, pack, no_ejected)
  local offset = 0
  while true do
    local batch
    if pack then
      batch = redis.call('ZREVRANGEBYSCORE', avail, '(' .. max, '-inf', 'LIMIT', offset, 16)
    else
      batch = redis.call('ZRANGEBYSCORE', avail, '-inf', '(' .. max, 'LIMIT', offset, 16)
    end
    if #batch == 0 then return nil end
    for _, pod in ipairs(batch) do
      if not excluded(pod, exclude) then
        local s = redis.call('MGET', K.pod_draining(pod), K.pod_tier(pod))
        if not s[1] and s[2] and not is_unready(pod) and (no_ejected or not is_ejected(pod)) then
          return pod
        end
      end
    end
    offset = offset + #batch
  end
end

-- The first pod the chain can give, skipping those exclude lists: pod, source_pool
-- label, pool type, available key (nil when none). no_ejected: see
-- take_exclusive.
local function take_from_chain(chain, tiers, exclude, no_ejected)
  for _, step in ipairs(chain) do
    local key, _, label = pools_of(step)
    local pod, kind
    if string.sub(step, 1, 9) == 'merchant:' then
      pod, kind = take_exclusive(key, exclude, no_ejected), 'exclusive'
    elseif tiers[step] and tiers[step].type == 'shared' then
      pod, kind = take_shared(key, tiers[step].max, exclude, tiers[step].pack, no_ejected), 'shared'
    elseif tiers[step] then
      pod, kind = take_exclusive(key, exclude, no_ejected), 'exclusive'
    end
    if pod then
      return pod, label, kind, key
    end
  end
  return nil
end

-- Gives pod to call_id: pod info, lease, and on a shared pod its slot and
-- per-call lease (the writes of allocate.lua, shared with move_call.lua).
-- now_s is now's unix seconds as text, when the caller has it.
local function assign(pod, call_id, source, kind, avail, lease_ms, now, now_s)
  now_s = now_s or tostring(math.floor(now / 1000))
  redis.call('HSET', K.pod_info(pod), 'status', 'allocated', 'allocated_call_sid', call_id,
    'allocated_at', now_s, 'source_pool', source)
  if kind == 'shared' then
    redis.call('ZINCRBY', avail, 1, pod)
    redis.call('ZADD', K.pod_calls(pod), now + lease_ms, call_id)
  end
  redis.call('SET', K.lease(pod), call_id, 'PX', lease_ms)
end


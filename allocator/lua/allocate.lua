-- allocate.lua: give a call one pod, walking its fallback chain, in one step.
--
-- KEYS[1] -> call info hash (K.call(call_id))
-- KEYS[2] -> the call's tombstone (K.call_ended(call_id))
-- ARGV[1] -> call id
-- ARGV[2] -> merchant id ("" for none)
-- ARGV[3] -> lease TTL in ms (the window for the media socket to arrive)
-- ARGV[4] -> call info TTL in ms
-- ARGV[5] -> creator: who asks ("provider:twilio", "token:<name>", or "")
-- ARGV[6] -> number of tiers N, then N triples: name, type, max_concurrent
-- then    -> number of default chain steps M, then M step names
--
-- Returns:
--   {"ok", pod, source_pool, was_existing (0|1), pool_type, warning, creator}
--   {"none", reason ("no_pods"|"all_draining"|"at_capacity"), warning, chain...}
--   {"ended", how}   the call ended ("released"|"expired"|"unregistered"):
--                    a late or replayed webhook; nothing is written
-- warning is "" or a note for the log (a bad merchant config entry). creator
-- is the one stored with the call: on a repeat it may not be the asker's.
--
-- Idempotent per call id: a repeat, or a duplicate racing it, finds the call
-- info this script wrote and gets the same pod. A failure writes nothing.
-- The live call info is read before the tombstone: the predecessor, which
-- does not read tombstones, may have allocated the call again, and that
-- allocation is real.

local call_key, call_id, merchant = KEYS[1], ARGV[1], ARGV[2]
local lease_ms, info_ms, creator = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]

local existing = redis.call('HMGET', call_key, 'pod_name', 'source_pool', 'pool_type', 'creator')
if existing[1] then
  return {'ok', existing[1], existing[2] or '', 1, existing[3] or '', '', existing[4] or ''}
end
local ended = redis.call('GET', KEYS[2])
if ended then
  return {'ended', ended}
end

local tiers, i = {}, 7
for _ = 1, tonumber(ARGV[6]) do
  tiers[ARGV[i]] = {type = ARGV[i + 1], max = tonumber(ARGV[i + 2])}
  i = i + 3
end
local default_chain = {}
for _ = 1, tonumber(ARGV[i]) do
  i = i + 1
  default_chain[#default_chain + 1] = ARGV[i]
end

-- Merchant config: dedicated pool first, then its fallback or the default.
local chain, warning = default_chain, ''
if merchant ~= '' then
  local raw = redis.call('HGET', K.merchant_config(), merchant)
  if raw then
    local ok, mc = pcall(cjson.decode, raw)
    if not ok or type(mc) ~= 'table' then
      warning = 'merchant config of ' .. merchant .. ' is not valid JSON; using the default chain'
    else
      if type(mc.fallback) == 'table' and #mc.fallback > 0 then
        chain = {}
        for _, step in ipairs(mc.fallback) do
          if type(step) == 'string' then chain[#chain + 1] = step end
        end
      end
      if type(mc.pool) == 'string' and mc.pool ~= '' then
        local with_pool = {'merchant:' .. mc.pool}
        for _, step in ipairs(chain) do
          if step ~= with_pool[1] then with_pool[#with_pool + 1] = step end
        end
        chain = with_pool
      end
    end
  end
end

-- SPOP semantics of the seeds: a draining, unready or unregistered pod
-- popped from an available set does not belong there and stays out (the pod
-- source puts an unready one back when it is ready); a pod still held by a
-- live call (a predecessor's double release) stays out until released.
local function take_exclusive(avail)
  while true do
    local pod = redis.call('SPOP', avail)
    if not pod then return nil end
    if not is_draining(pod) and redis.call('EXISTS', K.pod_tier(pod)) == 1 and not is_unready(pod)
        and not live_owner(pod) then
      return pod
    end
  end
end

-- Least-loaded non-draining, ready pod below max_concurrent.
local function take_shared(avail, max)
  local offset = 0
  while true do
    local batch = redis.call('ZRANGEBYSCORE', avail, '-inf', '(' .. max, 'LIMIT', offset, 16)
    if #batch == 0 then return nil end
    for _, pod in ipairs(batch) do
      if not is_draining(pod) and redis.call('EXISTS', K.pod_tier(pod)) == 1 and not is_unready(pod) then
        return pod
      end
    end
    offset = offset + #batch
  end
end

local pod, source, kind, avail
for _, step in ipairs(chain) do
  local key, _, label = pools_of(step)
  if string.sub(step, 1, 9) == 'merchant:' then
    pod, kind = take_exclusive(key), 'exclusive'
  elseif tiers[step] and tiers[step].type == 'shared' then
    pod, kind = take_shared(key, tiers[step].max), 'shared'
  elseif tiers[step] then
    pod, kind = take_exclusive(key), 'exclusive'
  end
  if pod then
    source, avail = label, key
    break
  end
end

if not pod then
  -- Tell "nothing there" from "all draining" from "all busy", sampling at
  -- most 64 pods per pool so that an empty-pool storm stays cheap.
  local assigned, draining, sampled = 0, 0, 0
  for _, step in ipairs(chain) do
    local _, assigned_key = pools_of(step)
    assigned = assigned + redis.call('SCARD', assigned_key)
    for _, p in ipairs(redis.call('SRANDMEMBER', assigned_key, 64)) do
      sampled = sampled + 1
      if is_draining(p) then draining = draining + 1 end
    end
  end
  local reason = 'at_capacity'
  if assigned == 0 then
    reason = 'no_pods'
  elseif draining == sampled then
    reason = 'all_draining'
  end
  local reply = {'none', reason, warning}
  for _, step in ipairs(chain) do reply[#reply + 1] = step end
  return reply
end

local now = now_ms()
local expires = now + lease_ms
local now_s = tostring(math.floor(now / 1000))
redis.call('HSET', call_key, 'pod_name', pod, 'source_pool', source, 'merchant_id', merchant,
  'allocated_at', now_s, 'pool_type', kind, 'creator', creator)
redis.call('HDEL', call_key, '_lock')
redis.call('PEXPIRE', call_key, info_ms)
redis.call('HSET', K.pod_info(pod), 'status', 'allocated', 'allocated_call_sid', call_id,
  'allocated_at', now_s, 'source_pool', source)
if kind == 'shared' then
  redis.call('ZINCRBY', avail, 1, pod)
  redis.call('ZADD', K.pod_calls(pod), expires, call_id)
end
redis.call('SET', K.lease(pod), call_id, 'PX', lease_ms)
return {'ok', pod, source, 0, kind, warning, creator}

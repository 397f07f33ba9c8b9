-- lib.lua: helpers shared by every script. The script loader prepends the
-- generated key builders (table K, from keys.go), then this file, then the
-- script itself, so one chunk holds all three.

-- Redis' own clock, so that every replica writes lease expiries on one clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Whether a script whose caller gave up at stale_after (unix ms as a
-- string; "0" or absent: never) reaches Redis too late to change anything
-- (a pause, a partition that heals: its webhook was answered "cannot
-- serve", its socket refused).
local function stale(stale_after, now)
  local at = tonumber(stale_after or '0') or 0
  return at > 0 and now > at
end

-- The pools behind a tier value ("gold" or "merchant:<id>"): available key,
-- assigned key, and the source_pool label the seeds store ("pool:gold",
-- "merchant:<id>").
local function pools_of(tier)
  local merchant = string.match(tier, '^merchant:(.+)$')
  if merchant then
    return K.merchant_pods(merchant), K.merchant_assigned(merchant), tier
  end
  return K.pool_available(tier), K.pool_assigned(tier), 'pool:' .. tier
end

-- The tier value behind a source_pool label ("pool:gold" -> "gold").
local function tier_of_source(source)
  return string.match(source, '^pool:(.+)$') or source
end

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
local function is_ejected(pod)
  return redis.call('ZSCORE', K.ejected(), pod) ~= false
end

-- The tier table and default chain of allocate's argument layout, from
-- ARGV[i]: N, then N quadruples (name, type, max_concurrent, placement
-- "spread"|"pack"), then M, then M step names.
local function parse_tiers(i)
  local tiers = {}
  for _ = 1, tonumber(ARGV[i]) do
    tiers[ARGV[i + 1]] = {type = ARGV[i + 2], max = tonumber(ARGV[i + 3]), pack = ARGV[i + 4] == 'pack'}
    i = i + 4
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
local function assign(pod, call_id, source, kind, avail, lease_ms, now)
  local now_s = tostring(math.floor(now / 1000))
  redis.call('HSET', K.pod_info(pod), 'status', 'allocated', 'allocated_call_sid', call_id,
    'allocated_at', now_s, 'source_pool', source)
  if kind == 'shared' then
    redis.call('ZINCRBY', avail, 1, pod)
    redis.call('ZADD', K.pod_calls(pod), now + lease_ms, call_id)
  end
  redis.call('SET', K.lease(pod), call_id, 'PX', lease_ms)
end

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

-- Admission (max_calls): a merchant's live calls, counted in
-- K.merchant_calls(merchant) (call id -> lease expiry, see keys.go). Every
-- script that creates, renews, moves or ends a call keeps the set; an entry
-- past its expiry is a dead call the sweep has not ended yet, and counts
-- for nothing.

-- Puts (or refreshes) a call in its merchant's set. The set has no TTL:
-- every path that ends a call takes it out (end_call_record), so the set
-- empties, and Redis drops it, as the merchant's calls end. Entries whose
-- lease ran out (a call the predecessor's release ended, which does not
-- know the set) count for nothing and are dropped on the way: with now
-- for every call (renewals), with sometimes for one call in 16 (by a hex
-- digit of its id's hash: allocate's cheaper form); merchant_live drops
-- them too.
local function count_call(merchant, call_id, expiry, now, sometimes)
  if not merchant or merchant == '' then
    return
  end
  local key = K.merchant_calls(merchant)
  if now and (not sometimes or string.sub(redis.sha1hex(call_id), 6, 6) == '0') then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. now)
  end
  redis.call('ZADD', key, expiry, call_id)
end

-- Takes an ending call out of its merchant's set; call before its call
-- info is deleted (the merchant is read from there).
-- merchant is the call's merchant_id when the caller has read it (nil:
-- read here).
local function uncount_call(call_id, merchant)
  if merchant == nil then
    merchant = redis.call('HGET', K.call(call_id), 'merchant_id')
  end
  if merchant and merchant ~= '' then
    redis.call('ZREM', K.merchant_calls(merchant), call_id)
  end
end

-- The merchant's live calls now (expired entries are dropped on the way).
local function merchant_live(merchant, now)
  local key = K.merchant_calls(merchant)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. now)
  return redis.call('ZCARD', key)
end

-- The max_calls cap of a decoded merchant config: a positive integer, or
-- nil for none. A stored value that is not one (written by hand: the admin
-- API refuses it) means no cap, with a note for the log, rather than
-- refusing every call of the merchant.
local function cap_of(merchant, mc)
  if type(mc) ~= 'table' or mc.max_calls == nil then
    return nil, ''
  end
  local n = mc.max_calls
  if type(n) ~= 'number' or n < 1 or n ~= math.floor(n) then
    return nil, 'merchant config of ' .. merchant .. ' has an invalid max_calls; not capping'
  end
  return n, ''
end

-- The merchant's own rate (rate_per_second, rate_burst in its
-- config) in place of the global one (rate, burst). A stored value that
-- is not valid (written by hand: the admin API refuses it) keeps the
-- global rate, with a note for the log.
local function merchant_rate_of(merchant, mc, rate, burst)
  if type(mc) ~= 'table' or mc.rate_per_second == nil then
    return rate, burst, ''
  end
  local r, b = mc.rate_per_second, mc.rate_burst
  if type(r) ~= 'number' or r <= 0 or r ~= r then
    return rate, burst, 'merchant config of ' .. merchant .. ' has an invalid rate_per_second; using the global rate'
  end
  if type(b) ~= 'number' or b < 1 or b ~= math.floor(b) then
    b = math.max(1, math.ceil(r))
  end
  return r, b, ''
end

-- Admission rate limits (admission.rate.*): token buckets in Redis, so every
-- replica takes from the same one. A bucket is a hash {tokens, at}; a
-- missing one is full.

-- The bucket's tokens now, refilled at rate per second up to burst, and
-- the ms until it holds one (0 when it does).
local function bucket_peek(key, rate, burst, now)
  local b = redis.call('HMGET', key, 'tokens', 'at')
  local tokens, at = tonumber(b[1]), tonumber(b[2])
  if not tokens or not at then
    tokens, at = burst, now
  end
  tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
  if tokens >= 1 then
    return tokens, 0
  end
  return tokens, math.ceil((1 - tokens) * 1000 / rate)
end

local function bucket_take(key, tokens, rate, burst, now)
  redis.call('HSET', key, 'tokens', tostring(tokens - 1), 'at', tostring(now))
  redis.call('PEXPIRE', key, math.ceil(burst * 1000 / rate) + 1000)
end

-- Takes one token from the merchant's and the source's buckets (rates of
-- 0 are off), or none when either is empty. Returns nil, or the scope
-- ("merchant"|"source") and the ms until it has a token.
local function take_rate(merchant, source, m_rate, m_burst, s_rate, s_burst, now)
  local todo = {}
  if m_rate > 0 and merchant ~= '' then
    todo[#todo + 1] = {'merchant', K.rate_merchant(merchant), m_rate, m_burst}
  end
  if s_rate > 0 and source ~= '' then
    todo[#todo + 1] = {'source', K.rate_source(source), s_rate, s_burst}
  end
  for _, b in ipairs(todo) do
    local tokens, wait = bucket_peek(b[2], b[3], b[4], now)
    if wait > 0 then
      return b[1], wait
    end
    b[5] = tokens
  end
  for _, b in ipairs(todo) do
    bucket_take(b[2], b[5], b[3], b[4], now)
  end
  return nil
end

-- The demand signal (allocator/demand.go reads it): a call refused for
-- want of a pod counts against the last step of its chain (the tier that
-- would have to grow, the overflow tier for the default chain) for
-- DEMAND_WINDOW_MS after its last refusal (demand.go's DemandWindow), once
-- however often it asks, and only as far as admission would have admitted
-- it: a merchant's refused calls (K.demand_merchant, group) count up to
-- bound, its max_calls less its live calls, or the uncapped bound. So no
-- caller moves the signal past its merchants' caps.
local DEMAND_WINDOW_MS = 60000
local function note_refused(call_id, group, bound, chain, now)
  local last = chain[#chain]
  if not last then
    return
  end
  local expiry = now + DEMAND_WINDOW_MS
  local by_merchant, by_tier = K.demand_merchant(group), K.demand_pending(last)
  redis.call('ZREMRANGEBYSCORE', by_merchant, '-inf', now)
  if not redis.call('ZSCORE', by_merchant, call_id) and redis.call('ZCARD', by_merchant) >= bound then
    return
  end
  redis.call('ZADD', by_merchant, expiry, call_id)
  redis.call('PEXPIRE', by_merchant, DEMAND_WINDOW_MS)
  redis.call('ZREMRANGEBYSCORE', by_tier, '-inf', now)
  redis.call('ZADD', by_tier, expiry, call_id)
  redis.call('PEXPIRE', by_tier, DEMAND_WINDOW_MS)
end

-- An ended call's compact mark (K.ended_marks, keys.go): in a sorted set
-- per shard of call ids, the call id scored by when it ended (unix ms) times
-- 4 plus how (ENDED_HOW), so that one ZSCORE tells whether and how the call
-- ended within the providers' retry horizon (allocator.ended_ttl), long
-- after its full record is gone. A mark older than the horizon counts for
-- nothing and is dropped by a later write to its shard. The constant is
-- keys.go's EndedMarkShards.
local ENDED_MARK_SHARDS = 16384
local ENDED_HOW = {released = 1, expired = 2, unregistered = 3}
local ENDED_HOW_NAME = {[0] = 'released', 'released', 'expired', 'unregistered'}

-- The shard of a call's mark (keys.go's EndedMarkShard), and whether a
-- write of this call's mark trims its shard: one call in 16, by a hex
-- digit of the hash the shard does not use.
local function ended_mark_shard(call_id)
  local h = redis.sha1hex(call_id)
  return tonumber(string.sub(h, 1, 4), 16) % ENDED_MARK_SHARDS, string.sub(h, 5, 5) == '0'
end

local function mark_ended(call_id, how, horizon_ms, now)
  if not horizon_ms or horizon_ms <= 0 then
    return
  end
  local shard, trim = ended_mark_shard(call_id)
  local key = K.ended_marks(shard)
  if trim then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%.0f', (now - horizon_ms) * 4))
  end
  redis.call('ZADD', key, string.format('%.0f', now * 4 + (ENDED_HOW[how] or 0)), call_id)
end

-- The marks of the layout before: one hash per hour of end times
-- (ENDED_BUCKET_MS) and shard of call ids (keys.go's EndedBucket and
-- EndedShards), call id -> how, each hash expiring horizon_ms after its
-- hour. An edge that wrote them may still run (a rolling upgrade), and
-- its marks refuse replays until they expire: they are read while
-- K.ended_legacy() exists (the allocator sets it while such hashes do,
-- endedlayout.go).
local ENDED_BUCKET_MS, ENDED_SHARDS = 3600000, 1024

local function legacy_ended_mark(call_id, horizon_ms, now)
  local shard = tonumber(string.sub(redis.sha1hex(call_id), 1, 4), 16) % ENDED_SHARDS
  local oldest = math.floor((now - horizon_ms) / ENDED_BUCKET_MS)
  for bucket = math.floor(now / ENDED_BUCKET_MS), oldest, -1 do
    local how = redis.call('HGET', K.ended_calls(bucket .. ':' .. shard), call_id)
    if how then
      return how
    end
  end
  return nil
end

-- Looks at one hour of marks of the layout before, all its shards in one
-- EXISTS: the hour back hours before now's (presence.lua, each replica's
-- beat, one hour a beat). While any exists, K.ended_legacy() lasts until
-- that hour's hashes expire, and a minute for the clocks.
local function look_legacy(now, horizon_ms, back)
  local bucket = math.floor(now / ENDED_BUCKET_MS) - back
  local keys = {}
  for shard = 0, ENDED_SHARDS - 1 do
    keys[shard + 1] = K.ended_calls(bucket .. ':' .. shard)
  end
  if redis.call('EXISTS', unpack(keys)) == 0 then
    return
  end
  local untl = string.format('%.0f', (bucket + 1) * ENDED_BUCKET_MS + horizon_ms + 60000)
  if (tonumber(redis.call('GET', K.ended_legacy()) or '0') or 0) < tonumber(untl) then
    redis.call('SET', K.ended_legacy(), untl)
    redis.call('PEXPIREAT', K.ended_legacy(), untl)
  end
end

-- How the call ended according to its mark within the last horizon_ms, or
-- nil. legacy says whether marks of the layout before may exist (nil: look
-- whether K.ended_legacy() does).
local function ended_mark(call_id, horizon_ms, now, legacy)
  if not horizon_ms or horizon_ms <= 0 then
    return nil
  end
  local score = tonumber(redis.call('ZSCORE', K.ended_marks((ended_mark_shard(call_id))), call_id) or '')
  if score and score >= (now - horizon_ms) * 4 then
    return ENDED_HOW_NAME[score % 4]
  end
  if legacy == nil then
    legacy = redis.call('EXISTS', K.ended_legacy()) == 1
  end
  if legacy then
    return legacy_ended_mark(call_id, horizon_ms, now)
  end
  return nil
end

-- end_call_record ends a call's info: its tombstone (K.call_ended) becomes
-- the call's record, the call info's fields but the media claim and the
-- resumable mark (a socket's identity, never shown), with how it ended, ended_at (unix ms) and extra,
-- a flat list of field/value pairs; it lives ttl_ms. The call's compact
-- mark (mark_ended) keeps it ended for horizon_ms. The caller has checked
-- that the call info is the one to end. The old tombstone is deleted first:
-- a replica of an older edge wrote it as a STRING. The call leaves its
-- merchant's count (admission) in the same step.
-- fields is the call info as HGETALL returned it when the caller read it
-- (nil: read here); edge_only says the record is edge's alone (its
-- edge_pod is its pod_name), so the predecessor's per-pod set cannot list the
-- call. now is Redis' time if the caller read it (nil: read here);
-- also_del is nil or one more key to delete with the call info (a lease
-- the release gives up). Returns the time it ended (unix ms).
local function end_call_record(call_id, how, ttl_ms, horizon_ms, extra, fields, edge_only, now, also_del)
  local call_key, tomb = K.call(call_id), K.call_ended(call_id)
  if not fields then
    fields = redis.call('HGETALL', call_key)
  end
  local f = {}
  for i = 1, #fields - 1, 2 do
    f[fields[i]] = fields[i + 1]
  end
  uncount_call(call_id, f.merchant_id or '')
  for _, replica in ipairs({f.socket_replica or '', f.answered_by or ''}) do
    if replica ~= '' then
      redis.call('SREM', K.replica_calls(replica), call_id)
    end
  end
  -- The predecessor's per-pod call set, which its reconciler reads when a
  -- pod dies: a call ended here (sweep, sync, unregister) leaves it too.
  local pod = f.pod_name
  if pod and not edge_only and redis.call('TYPE', K.predecessor_pod_calls(pod))['ok'] == 'set' then
    redis.call('SREM', K.predecessor_pod_calls(pod), call_id)
  end
  if also_del then
    redis.call('DEL', tomb, call_key, also_del)
  else
    redis.call('DEL', tomb, call_key)
  end
  now = now or now_ms()
  local record = {'how', how, 'ended_at', tostring(now)}
  for i = 1, #fields - 1, 2 do
    local name = fields[i]
    if name ~= 'media_claim' and name ~= 'resumable' and name ~= 'how' and name ~= 'ended_at' then
      record[#record + 1], record[#record + 2] = name, fields[i + 1]
    end
  end
  -- extra last: it overrides a field of the same name, as a second HSET did.
  for i = 1, #(extra or {}) do
    record[#record + 1] = extra[i]
  end
  redis.call('HSET', tomb, unpack(record))
  redis.call('PEXPIRE', tomb, ttl_ms)
  mark_ended(call_id, how, horizon_ms, now)
  return now
end

-- Writes a new call's allocation of pod: its call info, the pod's state and
-- the merchant's count (allocate.lua, and waitlib.lua's hand-off to a
-- waiting call). more is nil or a flat list of further call info fields,
-- written in the same HSET. The call info's edge_pod is the pod edge gave
-- the call: while pod_name names the same pod, the record is edge's alone
-- (an allocate that respects the predecessor's idempotency lock wrote it,
-- so the predecessor never stored its own pod over it), and release.lua
-- skips its checks for records both routers wrote.
local function write_allocation(call_id, merchant, creator, traceparent, pod, source, kind, avail, lease_ms, info_ms, now, more)
  local call_key = K.call(call_id)
  local fields = {'pod_name', pod, 'source_pool', source, 'merchant_id', merchant,
    'allocated_at', tostring(math.floor(now / 1000)), 'allocated_at_ms', tostring(now), 'pool_type', kind,
    'creator', creator, 'edge_pod', pod}
  if traceparent and traceparent ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'traceparent', traceparent
  end
  for i = 1, #(more or {}) do
    fields[#fields + 1] = more[i]
  end
  redis.call('HSET', call_key, unpack(fields))
  if not more then
    -- A waiter's hand-off: the predecessor's lock may be on the record.
    redis.call('HDEL', call_key, '_lock')
  end
  redis.call('PEXPIRE', call_key, info_ms)
  assign(pod, call_id, source, kind, avail, lease_ms, now)
  count_call(merchant, call_id, now + lease_ms, now, true)
end

-- Recovery after Redis lost its data (restarted empty, flushed): K.epoch()
-- names the data set; a replica that remembers another value has calls
-- Redis no longer knows, and re-asserts them (renew.lua) while
-- K.recovering() holds every allocation back.

-- Starts the hold for a data set born at epoch ("<unix ms>-<random>"), to
-- last hold_ms from its birth: a replica that finds the epoch changed
-- after another replica (one with nothing to re-assert) created it holds
-- back allocations for what remains of the window, never longer.
local function start_hold(epoch, hold_ms, now)
  local born = tonumber(string.match(epoch, '^(%d+)-'))
  if hold_ms <= 0 or not born then
    return
  end
  local left = born + hold_ms - now
  if left > 0 then
    redis.call('SET', K.recovering(), epoch, 'PX', left, 'NX')
  end
end

-- Stores a new epoch, born now on Redis' clock (so that every replica
-- measures the hold alike), unless one appeared meanwhile; returns the one
-- stored.
local function new_epoch(random, now)
  local epoch = string.format('%.0f', now) .. '-' .. random
  if redis.call('SET', K.epoch(), epoch, 'NX') then
    redis.call('SET', K.epoch_seen(epoch), '1')
    return epoch
  end
  return redis.call('GET', K.epoch())
end

-- The epoch stored now, creating it (with candidate) when missing. known is
-- the epoch the asking replica remembers ("" when it never saw one: a fresh
-- process, which has no calls to re-assert) and candidate the random part
-- of a new one. A replica that knew one and finds none is the first to see
-- Redis emptied: it starts the hold. The second value says whether a hold
-- may have been started here.
local function current_epoch(known, candidate, hold_ms, now)
  local epoch = redis.call('GET', K.epoch())
  if epoch then
    if known ~= '' and epoch ~= known then
      start_hold(epoch, hold_ms, now)
      return epoch, true
    end
    return epoch, false
  end
  if known == '' or candidate == '' then
    return nil, false
  end
  epoch = new_epoch(candidate, now)
  start_hold(epoch, hold_ms, now)
  return epoch, true
end

-- How long (ms) an allocation must wait before a pod may be offered: while
-- the hold lasts, and while the asking replica itself has not re-asserted
-- its calls (it knows another epoch). 0: go on. holding says whether
-- K.recovering() existed when the caller looked, seen whether
-- K.epoch_seen(known) did (nil: not known): with neither, a replica that
-- knows no epoch, or whose epoch is still Redis' one, goes on without
-- reading it (a fresh replica creates none here, and learns the epoch
-- from its heartbeat).
local function recovery_wait(known, candidate, hold_ms, now, holding, seen)
  if holding == false and (known == '' or seen) then
    return 0
  end
  local epoch, started = current_epoch(known, candidate, hold_ms, now)
  if seen == false and known ~= '' and epoch == known then
    -- An epoch an older edge stored, without its mark.
    redis.call('SET', K.epoch_seen(epoch), '1')
  end
  if holding ~= false or started then
    local left = redis.call('PTTL', K.recovering())
    if left > 0 then
      return left
    end
  end
  if known ~= '' and epoch and epoch ~= known then
    return 100
  end
  return 0
end

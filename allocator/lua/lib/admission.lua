-- admission.lua: a merchant's live calls (max_calls), the rate limits' token buckets and the demand signal.

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
-- for every call (renewals), with sometimes in one run in 16 (by Redis'
-- clock: allocate's cheaper form); merchant_live drops them too.
local function count_call(merchant, call_id, expiry, now, sometimes)
  if not merchant or merchant == '' then
    return
  end
  local key = K.merchant_calls(merchant)
  -- The times are whole ms: '%d' formats them several times faster than
  -- Lua's and Redis' number to text (a floating point printf).
  if now and (not sometimes or now % 16 == 0) then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%d', now))
  end
  redis.call('ZADD', key, string.format('%d', expiry), call_id)
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
-- deferred: only a refused call counts.
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


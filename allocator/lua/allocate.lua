-- allocate.lua: give a call one pod, walking its fallback chain, in one step.
--
-- KEYS[1] -> call info hash (K.call(call_id))
-- KEYS[2] -> the call's tombstone (K.call_ended(call_id))
-- KEYS[3] -> the set of the call's compact mark (K.ended_marks, keys.go's
--            EndedMarksOf: lib/ended.lua's ended_mark)
-- ARGV[1] -> call id
-- ARGV[2] -> merchant id ("" for none)
-- ARGV[3] -> lease TTL in ms (the window for the media socket to arrive)
-- ARGV[4] -> call info TTL in ms
-- ARGV[5] -> creator: who asks ("provider:twilio", "token:<name>", or "")
-- ARGV[6] -> number of tiers N, then per tier: name, type, and for a
--            shared tier max_concurrent and placement ("spread"|"pack")
-- then    -> number of default chain steps M, then M step names
-- then    -> admission rates (admission.rate.*): merchant per second, merchant
--            burst, source per second, source burst (0 per second: off)
-- then    -> wait budget in ms (admission.wait): a call that finds
--            every pod of its chain busy waits this long (0: refused at once)
-- then    -> the data set epoch the replica knows ("" none), the random
--            part of a new epoch to store if none is, and the recovery hold in ms (lib/recovery.lua's
--            recovery_wait: after Redis lost its data, no pod is offered
--            until the replicas have re-asserted their live calls)
-- then    -> ended TTL in ms: how far back the compact marks of ended
--            calls are read (lib/ended.lua's ended_mark)
-- then    -> admission.demand.uncapped_calls: how many refused calls a
--            merchant without max_calls adds to the demand signal at most
-- then    -> the answering replica's name ("" none): recorded on a new
--            call (answered_by) and in its K.replica_calls set
-- then    -> "1" while this replica has not yet looked whether marks of
--            the layout before exist (endedlayout.go): they are read
--            whatever K.ended_legacy() says; "0" otherwise
-- last but two -> stale after: unix ms past which the caller has given up
--            (its deadline and a margin for the clocks, "0": none): a
--            script that reaches Redis later (a pause, a partition that
--            heals) allocates nothing. Read as ARGV[#ARGV - 2].
-- last but one -> account: the provider account whose credentials verified
--            the webhook ("" none), stored with a new call (account) and
--            its wait ticket, and returned on a repeat. Read as
--            ARGV[#ARGV - 1], so that the replies before the tiers are
--            parsed can read it; add arguments before it.
-- last    -> traceparent: the W3C trace context of the webhook that asks, or
--            "" (tracing off); kept with a new call so that its media
--            socket's span links to the webhook's trace. It is read as
--            ARGV[#ARGV], so arguments added before it keep their places.
--
-- Returns:
--   {"ok", pod, source_pool, was_existing (0|1), pool_type, warning, creator, account}
--   {"none", reason ("no_pods"|"all_draining"|"at_capacity"|"merchant_at_cap"), warning, chain...}
--   {"wait", deadline (unix ms), warning, chain...}
--                    every pod of the chain is busy: the call waits in its
--                    merchant's queue (lib/waits.lua) until a script gives it
--                    a pod or the deadline passes; asking again (same call
--                    id) answers "ok" once it was served, "wait" until then
--   {"limited", scope ("merchant"|"source"), retry_after_ms, warning}
--                    the merchant or the creator (the source) started calls
--                    faster than its admission rate; nothing is written
--   {"recovering", ms} Redis lost its data moments ago and the replicas are
--                    re-asserting their calls: ask again in ms; nothing is
--                    written
--   {"locked", ttl_ms} the predecessor holds the call's idempotency lock
--                    (it is allocating the call): ask again until its
--                    allocation appears or the lock goes; nothing is written
--   {"stale"}        the caller's deadline passed before Redis ran the
--                    script (its webhook was answered "cannot serve"):
--                    nothing is written
--   {"ended", how}   the call ended ("released"|"expired"|"unregistered"):
--                    a late or replayed webhook, told by the call's
--                    tombstone or, once that expired, its compact mark;
--                    nothing is written
-- warning is "" or a note for the log (a bad merchant config entry). creator
-- and account are the ones stored with the call: on a repeat they may not
-- be the asker's.
--
-- Idempotent per call id: a repeat, or a duplicate racing it, finds the call
-- info this script wrote and gets the same pod. A failure writes nothing.
-- The live call info is read before the tombstone: the predecessor, which
-- does not read tombstones, may have allocated the call again, and that
-- allocation is real.

local call_key, call_id, merchant = KEYS[1], ARGV[1], ARGV[2]
local creator = ARGV[5]
local account = ARGV[#ARGV - 1] or ''

-- The call's allocation, if it has one: was_existing, unless a waiter's
-- hand-off wrote it and this is the waiter picking it up. The second value
-- says whether the predecessor's idempotency lock is on the call info.
local function answer_existing()
  local e = redis.call('HMGET', call_key, 'pod_name', 'source_pool', 'pool_type', 'creator', 'ended_by', 'account', '_lock')
  if not e[1] then
    return nil, e[7] ~= false
  end
  if e[5] then
    -- The provider said the call ended while its socket was open
    -- (release.lua): the call lives until that socket closes, but a late
    -- or replayed webhook is told it ended.
    return {'ended', 'released'}
  end
  local was = 1
  -- Only the call's creator picks the hand-off up: a stranger naming the
  -- call sees it as existing (and its creator), as for any live call.
  if (e[4] or '') == creator and (e[6] or '') == account and redis.call('HGET', K.wait_ticket(call_id), 'served') == '1' then
    redis.call('DEL', K.wait_ticket(call_id))
    was = 0
  end
  return {'ok', e[1], e[2] or '', was, e[3] or '', '', e[4] or '', e[6] or ''}
end

local existing, locked = answer_existing()
if existing then
  return existing
end
-- The predecessor's idempotency lock (call info {_lock: 1}, 30 s, seeds
-- 003 step 2): a predecessor replica is choosing a pod for this call right
-- now, or failed to and left its lock. A pod given over it would be the
-- call's second; the caller waits for the predecessor's answer instead
-- (edge itself never leaves _lock behind). Nothing is written.
if locked then
  return {'locked', redis.call('PTTL', call_key)}
end
-- What is there, in one command: EXISTS counts a key named twice twice,
-- so each key named 2^i times is bit i of the count. The call's tombstone
-- (bit 0), calls waiting for capacity (1), ejected pods (2), the recovery
-- hold (3), marks of the layout before (4), and the data set epoch this
-- replica knows (5: K.epoch_seen, when it knows one).
local tiers, default_chain, rate_i = parse_tiers(6)
local known_epoch = ARGV[rate_i + 5] or ''
local w, e, r, l = K.wait_deadline(), K.ejected(), K.recovering(), K.ended_legacy()
-- Most calls find none of the first five and the epoch seen: a count of
-- each once (the epoch's six times, more than the others can make) says
-- so in fewer arguments, each of which costs Redis time; any other count
-- asks again with the bits.
local present
if known_epoch ~= '' then
  local s = K.epoch_seen(known_epoch)
  present = redis.call('EXISTS', KEYS[2], w, e, r, l, s, s, s, s, s, s)
  if present == 0 or present == 6 then
    present = present == 6 and 32 or 0
  else
    present = redis.call('EXISTS', KEYS[2], w, w, e, e, e, e, r, r, r, r, r, r, r, r,
      l, l, l, l, l, l, l, l, l, l, l, l, l, l, l, l,
      s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s, s)
  end
else
  present = redis.call('EXISTS', KEYS[2], w, e, r, l)
  if present ~= 0 then
    present = redis.call('EXISTS', KEYS[2], w, w, e, e, e, e, r, r, r, r, r, r, r, r,
      l, l, l, l, l, l, l, l, l, l, l, l, l, l, l, l)
  end
end
-- The bits as booleans: most runs find the epoch's alone.
local tomb, waiting, any_ejected, holding, legacy_marks, seen = false, false, false, false, false, present == 32
if present ~= 0 and present ~= 32 then
  local function has(bit)
    return math.floor(present / 2 ^ bit) % 2 == 1
  end
  tomb, waiting, any_ejected, holding, legacy_marks, seen = has(0), has(1), has(2), has(3), has(4), has(5)
end
if tomb then
  -- The tombstone is the call's record (a HASH, its "how"); an older
  -- replica wrote the how as a STRING.
  if redis.call('TYPE', KEYS[2])['ok'] == 'hash' then
    return {'ended', redis.call('HGET', KEYS[2], 'how') or ''}
  end
  return {'ended', redis.call('GET', KEYS[2])}
end

local now = now_ms()
if stale(ARGV[#ARGV - 2], now) then
  return {'stale'}
end
-- Past its record's life, the call's compact mark keeps it ended for the
-- providers' retry horizon; marks of the layout before are read while
-- they may exist, or while this replica has not yet looked whether they
-- do (ARGV[rate_i + 11] "1").
local ended_how = ended_mark(KEYS[3], call_id, tonumber(ARGV[rate_i + 8] or 0), now,
  legacy_marks or ARGV[rate_i + 11] == '1')
if ended_how then
  return {'ended', ended_how}
end
local hold_wait = recovery_wait(ARGV[rate_i + 5] or '', ARGV[rate_i + 6] or '', ARGV[rate_i + 7] or '0', now,
  holding, seen)
if hold_wait > 0 then
  return {'recovering', hold_wait}
end
local chain, warning, mc = chain_of(merchant, default_chain, tiers)

-- A waiting call asking again (its replica was woken, polls, or its budget
-- ran out; or a duplicate webhook of it): room goes to the waiters in
-- their order, this one maybe among them. Its cap and rate were checked
-- when it started waiting.
local queued = waiting and redis.call('ZSCORE', K.wait_deadline(), call_id)
if queued and tonumber(queued) < now then
  -- Past its deadline (its waiter gave up on it): it asks as a new call.
  end_wait(call_id, false)
  queued = nil
end
if queued then
  local t = redis.call('HMGET', K.wait_ticket(call_id), 'creator', 'account')
  if t[1] ~= creator or (t[2] or '') ~= account then
    -- Another caller's (or another account's) waiting call: not this
    -- one's to join (nor, by giving up, to end). It is told what that
    -- caller was.
    local reply = {'none', 'at_capacity', warning}
    for _, step in ipairs(chain) do reply[#reply + 1] = step end
    return reply
  end
  serve_waiters(now)
  existing = answer_existing()
  if existing then
    return existing
  end
  local reply = {'wait', tonumber(queued), warning}
  for _, step in ipairs(chain) do reply[#reply + 1] = step end
  return reply
end

-- Admission (docs/admission.md), in this step: a merchant at its max_calls
-- gets no pod, whatever is free (counted from its live calls,
-- K.merchant_calls); then a token from the merchant's and the source's rate
-- buckets (the merchant's own rate_per_second, when its config has one).
local cap, note
if merchant ~= '' then
  cap, note = cap_of(merchant, mc)
  if warning == '' then warning = note end
  if cap and merchant_live(merchant, now) >= cap then
    local reply = {'none', 'merchant_at_cap', warning}
    for _, step in ipairs(chain) do reply[#reply + 1] = step end
    return reply
  end
end
-- With both rates off and no rate of the merchant's own, nothing to take
-- (the rates are read as text first: a number costs Redis a conversion).
if ARGV[rate_i] ~= '0' or ARGV[rate_i + 2] ~= '0' or (mc and mc.rate_per_second ~= nil) then
  local m_rate, m_burst, rate_note = merchant_rate_of(merchant, mc, tonumber(ARGV[rate_i] or 0),
    tonumber(ARGV[rate_i + 1] or 1))
  if warning == '' then warning = rate_note end
  local limited, retry_ms = take_rate(merchant, creator, m_rate, m_burst,
    tonumber(ARGV[rate_i + 2] or 0), tonumber(ARGV[rate_i + 3] or 1), now)
  if limited then
    return {'limited', limited, retry_ms, warning}
  end
end

-- Calls waiting for capacity are served before this one may look (no
-- arrival overtakes them); what room they cannot use, it may take.
if waiting then
  serve_waiters(now)
end
local pod, source, kind, avail = take_from_chain(chain, tiers, nil, not any_ejected)

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
  -- The demand signal counts the call within its merchant's bound: what
  -- admission would have admitted had there been a pod.
  local group, bound = '', tonumber(ARGV[rate_i + 9] or 0)
  if merchant ~= '' and mc then
    group = merchant
    if cap then
      bound = cap - merchant_live(merchant, now)
    end
  end
  note_refused(call_id, group, bound, chain, now)
  -- Only busy pods can free up within a webhook's budget: no_pods and
  -- all_draining are refused at once.
  local budget_ms = tonumber(ARGV[rate_i + 4] or 0)
  if reason == 'at_capacity' and budget_ms > 0 then
    local deadline = start_wait(call_id, merchant, creator, ARGV[#ARGV], chain, tiers, cap,
      tonumber(ARGV[3]), tonumber(ARGV[4]), budget_ms, now)
    if account ~= '' then
      -- lib/waits.lua's hand-off writes it with the call.
      redis.call('HSET', K.wait_ticket(call_id), 'account', account)
    end
    local reply = {'wait', deadline, warning}
    for _, step in ipairs(chain) do reply[#reply + 1] = step end
    return reply
  end
  local reply = {'none', reason, warning}
  for _, step in ipairs(chain) do reply[#reply + 1] = step end
  return reply
end

-- The replica that answered: should it die before the call's socket comes,
-- the leader ends the call (orphans.lua) instead of waiting out the lease.
-- It and the provider account whose webhook created the call go in the
-- call info's one write.
local answering = ARGV[rate_i + 10] or ''
local more = {}
if answering ~= '' then
  more = {'answered_by', answering}
  redis.call('SADD', K.replica_calls(answering), call_id)
end
if account ~= '' then
  more[#more + 1], more[#more + 2] = 'account', account
end
-- The TTLs as the caller sent them: as numbers, Redis would format them
-- back into text for each command.
write_allocation(call_id, merchant, creator, ARGV[#ARGV], pod, source, kind, avail, ARGV[3], ARGV[4], now, more)
return {'ok', pod, source, 0, kind, warning, creator, account}

-- release.lua: end a call's allocation, fenced on the call still owning its pod.
--
-- KEYS[1] -> call info hash (K.call(call_id))
-- KEYS[2] -> the call's tombstone (K.call_ended(call_id))
-- KEYS[3] -> the set of the call's compact mark (K.ended_marks, keys.go's
--            EndedMarksOf: lib/ended.lua's mark_ended)
-- ARGV[1] -> call id
-- ARGV[2] -> call info TTL in ms (the tombstone's)
-- ARGV[3] -> ended TTL in ms (the call's compact mark, lib/ended.lua's mark_ended)
-- ARGV[4] -> every tier and its pool type, as one text of space separated
--            pairs ("gold exclusive basic shared"): read only to know a
--            predecessor's call's pool type when its pool is absent, and
--            one argument costs Redis less than a pair of them per tier
-- ARGV[5] -> number of record fields M, then M field/value pairs the
--            tombstone keeps beside the call info's (who released, and the
--            media socket's close code and counters when its end released)
-- ARGV[6+2M] -> the creator the call must have ("" or absent: any): a
--            provider's status callback ends only the calls its own
--            webhooks created
-- ARGV[7+2M] -> with a creator, the provider account asking ("" or
--            absent: none): a call stored with an account (allocate.lua)
--            is ended only by that account's callbacks; a call stored
--            without one, by any of its creator's
--
-- Returns:
--   {"not_found"}                                      no live allocation
--                    (or, with a creator named, not the creator's call)
--   {"other_account"} the creator's call, but another account's: nothing
--                    is changed
--   {"unwaited"}     released by "provider" while the call waited for
--                    capacity (no call info yet): its wait ended, and a
--                    tombstone and mark refuse the call from now on
--   {"socket_open"}  released by "provider" (a status callback) while a
--                    socket holds the call: nothing is released; the call
--                    info keeps the first ended_by and provider_ended_at,
--                    and renewals stop (renew.lua), so the socket closes on
--                    the provider's close or at the next renewal at the latest
--   {"released", pod, to_pool (0|1), was_draining (0|1), source_pool, merchant_id, creator}
--   {"stale", pod, source_pool, merchant_id, creator}
--                    the call info was left over, but the pod no longer
--                    belongs to this call (its lease ran out and the pod was
--                    recovered, maybe to serve another call): nothing is
--                    returned to any pool, only the call info is removed.
--   {"wrongtype", key, type}
--                    a key the release would write holds a type neither
--                    edge nor the predecessor writes there: nothing is
--                    written (the types are checked before any write).
--
-- Runs once per allocation: the call info is deleted here, so a duplicate or
-- late release answers "not_found" and changes nothing. The call info goes
-- with its media claim, and a tombstone takes its place (how "released",
-- stale or not: either way the call is over), so a replayed webhook gets no
-- pod; the tombstone keeps the call's record for its timeline. A pod or
-- slot back in its pool goes to calls waiting for capacity first
-- (lib/waits.lua's serve_waiters), in this same step.
--
-- The call may be the predecessor's (no pool_type: released its way, the
-- pod's kind read from its pool), or a record both routers wrote: edge
-- allocated a pod over the predecessor's idempotency lock (before edge
-- respected it) and the predecessor then stored its own pod over edge's
-- fields, so the record names the predecessor's pod and source with
-- edge's pool_type and creator, and the predecessor listed the call in its
-- per-pod set (K.predecessor_pod_calls). Both pods are freed: the named
-- one the predecessor's way, and edge's, found by the call it holds (a
-- scan of the pools of edge's pool type, on this rare path only).
-- Otherwise a slot would stay counted in migration mode, where the sweep
-- never lowers a score for calls it cannot account for. Every read and
-- every write is typed before the first write, so the step is whole or
-- nothing. A record edge alone wrote (edge_pod, below) is not typed: its
-- first write is to its pod (pool or pod info), a key of the wrong type
-- there fails the script before anything is written, and what it writes
-- after is its pod's keys it read and keys only edge writes.

local call_key, call_id = KEYS[1], ARGV[1]
local extra = {}
for i = 6, 5 + 2 * tonumber(ARGV[5] or 0) do
  extra[#extra + 1] = ARGV[i]
end
local must_creator = ARGV[6 + #extra] or ''
local must_account = ARGV[7 + #extra] or ''
local by = extra[1] == 'released_by' and extra[2] or ''
-- What the release decides on, read once (the record itself becomes the
-- tombstone without passing through the script: end_call_record). The
-- call's account and who said it ended matter only to a provider's
-- callback: each field named costs Redis a walk of the record.
local g
if must_creator ~= '' or by == 'provider' then
  g = redis.call('HMGET', call_key, 'pod_name', 'source_pool', 'pool_type', 'merchant_id', 'socket_replica',
    'creator', 'edge_pod', 'answered_by', 'media_claim', 'resumable', 'account', 'ended_by')
else
  g = redis.call('HMGET', call_key, 'pod_name', 'source_pool', 'pool_type', 'merchant_id', 'socket_replica',
    'creator', 'edge_pod', 'answered_by', 'media_claim', 'resumable')
end
local f = {pod_name = g[1], source_pool = g[2], pool_type = g[3], merchant_id = g[4], socket_replica = g[5],
  creator = g[6], edge_pod = g[7], answered_by = g[8], media_claim = g[9], resumable = g[10], account = g[11],
  ended_by = g[12]}
local pod, source, kind = f.pod_name, f.source_pool or '', f.pool_type
-- Who the call was, for the release's log line.
local merchant_id, creator = f.merchant_id or '', f.creator or ''
-- Whether account (a call's or its wait ticket's) lets the asker end it.
local function account_ok(account)
  return must_creator == '' or (account or '') == '' or account == must_account
end
if not pod then
  -- A provider says the call ended while it still waits for capacity
  -- (admission.wait: the caller hung up during the wait): the wait ends,
  -- and the call is marked ended, so that its webhook, asking again when
  -- woken, is refused instead of given the next free pod.
  local ticket = K.wait_ticket(call_id)
  if by == 'provider' and must_creator ~= '' and redis.call('TYPE', ticket)['ok'] == 'hash'
      and redis.call('HGET', ticket, 'creator') == must_creator then
    local account = redis.call('HGET', ticket, 'account')
    if not account_ok(account) then
      return {'other_account'}
    end
    if end_wait(call_id, true) == 'waiting' then
      local now, tomb = now_ms(), K.call_ended(call_id)
      redis.call('DEL', tomb)
      redis.call('HSET', tomb, 'how', 'released', 'ended_at', tostring(now), 'creator', must_creator, unpack(extra))
      if account and account ~= '' then
        redis.call('HSET', tomb, 'account', account)
      end
      redis.call('PEXPIRE', tomb, tonumber(ARGV[2]))
      mark_ended(KEYS[3], call_id, 'released', tonumber(ARGV[3]), now)
      redis.call('PUBLISH', K.wait_wake(), call_id)
      return {'unwaited'}
    end
  end
  if by == 'socket' then
    -- A socket's end finds no call: Redis lost it (restarted empty) and
    -- no replica wrote it back yet. The call is over all the same: marked
    -- ended, so that a replica that answered its webhook does not write
    -- it back (renew.lua) and hold its pod for a lease.
    mark_ended(KEYS[3], call_id, 'released', tonumber(ARGV[3]), now_ms())
  end
  return {'not_found'}
end
if must_creator ~= '' and creator ~= must_creator then
  return {'not_found'}
end
if not account_ok(f.account) then
  return {'other_account'}
end
-- A webhook edge answered "cannot serve" may have allocated all the same
-- (its script ran after the answer gave up waiting: a Redis pause).
-- Released by "unanswered", such a call is ended only while no socket
-- holds it: a socket means a provider did learn of the call. So is one
-- whose socket a replica cut off from Redis refused ("refused"): a retry
-- of the provider's may have been admitted elsewhere.
if (by == 'unanswered' or by == 'refused' or by == 'provider') and f.media_claim then
  if by ~= 'provider' then
    return {'not_found'}
  end
  -- A provider said the call ended while its socket is open: the socket
  -- ends the call on the provider's close; the call only keeps who said
  -- so first (a duplicate or a later event changes nothing).
  if not f.ended_by then
    for i = 3, #extra - 1, 2 do
      if extra[i] == 'ended_by' or extra[i] == 'provider_ended_at' then
        redis.call('HSET', call_key, extra[i], extra[i + 1])
      end
    end
  end
  return {'socket_open'}
end

-- A record edge alone wrote (its edge_pod names its pod, lib/record.lua's
-- write_allocation: the predecessor never stored its pod over it) is
-- released on what it says:
-- its pool_type is its pod's kind (a tier with pods never changes type,
-- configstore.go) and the predecessor's per-pod set never lists it. The
-- first write is to the pod (its pool, or its pod info), so a key of the
-- wrong type there fails the script before anything is written.
if f.edge_pod == pod and kind then
  local tier = tier_of_source(source)
  local avail = pools_of(tier)
  local now = now_ms()
  -- now as text once, with '%d' (tostring is a floating point printf):
  -- unix ms has 13 digits, its first 10 the seconds.
  local now_text = string.format('%d', now)
  local released_at = string.sub(now_text, 1, -4)
  local function clear(draining)
    redis.call('HSET', K.pod_info(pod), 'status', draining and 'draining' or 'available',
      'allocated_call_sid', '', 'allocated_at', '', 'released_at', released_at)
  end
  -- waiters: whether a call may be waiting for a pod (K.wait_recent()).
  local reply, lease_key, waiters
  if kind == 'shared' then
    local s = redis.call('MGET', K.pod_draining(pod), K.pod_tier(pod), K.wait_recent())
    waiters = s[3] ~= false
    local calls = K.pod_calls(pod)
    local per_call = redis.call('ZSCORE', calls, call_id) ~= false
    local draining = s[1] ~= false
    if not per_call or s[2] ~= tier then
      -- The slot went with its lease (swept), or the pod left the tier:
      -- the pod's lease and owner belong to its new life.
      redis.call('ZREM', calls, call_id)
      reply = {'stale', pod, source, merchant_id, creator}
    else
      local score = tonumber(redis.call('ZSCORE', avail, pod) or '')
      -- The last call on the pod: its lease and owner go too.
      if redis.call('ZCARD', calls) == 1 then
        clear(draining)
        lease_key = K.lease(pod)
      end
      if score and score > 0 then
        redis.call('ZINCRBY', avail, -1, pod)
      end
      redis.call('ZREM', calls, call_id)
      reply = {'released', pod, (score and not draining) and 1 or 0, draining and 1 or 0, source, merchant_id, creator}
    end
  else
    -- Draining, registered in the call's tier, and the lease's call; then
    -- the pod info's owner and readiness.
    local s = redis.call('MGET', K.pod_draining(pod), K.pod_tier(pod), K.lease(pod), K.wait_recent())
    waiters = s[4] ~= false
    local p = redis.call('HMGET', K.pod_info(pod), 'allocated_call_sid', 'unready')
    local draining, leased = s[1] ~= false, s[3] == call_id
    -- A pod info with no owner under the call's lease: the predecessor's
    -- release reset it (see plan below); the call owns the pod.
    if p[1] == call_id or ((p[1] or '') == '' and leased) then
      local to_pool = 0
      if not draining and p[2] ~= '1' and s[2] == tier then
        redis.call('SADD', avail, pod)
        to_pool = 1
      end
      if leased then
        -- Deleted with the call info, in end_call_record's one DEL.
        lease_key = K.lease(pod)
      end
      clear(draining)
      reply = {'released', pod, to_pool, draining and 1 or 0, source, merchant_id, creator}
    else
      reply = {'stale', pod, source, merchant_id, creator}
    end
  end
  -- The tombstone's TTL as the caller sent it: a number would be
  -- formatted back into text for PEXPIRE.
  end_call_record(call_id, KEYS[3], 'released', ARGV[2], tonumber(ARGV[3]), extra, f, true, now, now_text, lease_key)
  if waiters then
    serve_waiters(now)
  end
  return reply
end

-- Phase 1, reads only. typed() notes the first key whose type is not
-- what it must be (or absent); then nothing is written.
local bad
local function typed(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= 'none' and t ~= want then
    bad = bad or {key, t}
    return false
  end
  return true
end
if merchant_id ~= '' then typed(K.merchant_calls(merchant_id), 'zset') end
if f.socket_replica and f.socket_replica ~= '' then typed(K.replica_calls(f.socket_replica), 'set') end

-- What release reads of one pod before it writes: p is the pod, tier its
-- call's tier, kind its pool's kind. A shared pod's per_call says it holds
-- the call's per-call lease, score is its load; an exclusive pod's owned
-- says its pod info names the call. nil (and bad set) when one of its
-- keys has the wrong type.
local function plan(p, tier, kind)
  local avail = pools_of(tier)
  local ok = typed(K.pod_info(p), 'hash') and typed(K.lease(p), 'string') and typed(K.pod_tier(p), 'string')
    and typed(avail, kind == 'shared' and 'zset' or 'set')
  if kind == 'shared' then
    ok = typed(K.pod_calls(p), 'zset') and ok
  end
  if not ok then
    return nil
  end
  local draining = is_draining(p)
  local pl = {pod = p, tier = tier, kind = kind, avail = avail, draining = draining,
    registered = redis.call('GET', K.pod_tier(p)) == tier}
  if kind == 'shared' then
    pl.per_call = redis.call('ZSCORE', K.pod_calls(p), call_id) ~= false
    pl.score = tonumber(redis.call('ZSCORE', avail, p) or '')
  else
    local owner = redis.call('HGET', K.pod_info(p), 'allocated_call_sid') or ''
    pl.leased = redis.call('GET', K.lease(p)) == call_id
    -- A pod info with no owner under the call's lease: the predecessor's
    -- release reset it (allocation fields cleared) after this call took
    -- the pod between that release's DEL of the lease and its reset. The
    -- call owns the pod (renew.lua writes the owner back).
    pl.owned = owner == call_id or (owner == '' and pl.leased)
    pl.unready = is_unready(p)
  end
  return pl
end

-- The named pod's kind is its pool's Redis type (what the pool is, whoever
-- allocated); an absent pool says nothing: the tier config does, then the
-- call's pool_type.
local tier = tier_of_source(source)
local tier_type = {}
for name, kind in string.gmatch(ARGV[4], '(%S+) (%S+)') do
  tier_type[name] = kind
end
local pool_t = redis.call('TYPE', (pools_of(tier)))['ok']
local pod_kind
if pool_t == 'zset' then
  pod_kind = 'shared'
elseif pool_t == 'set' or string.sub(tier, 1, 9) == 'merchant:' then
  pod_kind = 'exclusive'
else
  pod_kind = tier_type[tier] or kind or 'exclusive'
end
local named = plan(pod, tier, pod_kind)
local pred_set = K.predecessor_pod_calls(pod)
local pred_listed = false
if redis.call('TYPE', pred_set)['ok'] == 'set' then
  pred_listed = redis.call('SISMEMBER', pred_set, call_id) == 1
end

-- Whose allocation the named pod is: the predecessor's (no pool_type), or
-- edge's, or both routers' (see above).
local legacy = not kind
local mixed = false
local edge_pod
if named and kind then
  -- The predecessor lists only its own calls; a pool of another kind than
  -- edge's pool_type holds a pod edge did not take for the call.
  mixed = pred_listed or kind ~= pod_kind
end
if named and mixed then
  if kind == pod_kind and kind == 'shared' and named.per_call then
    edge_pod = named -- both took a slot of the same pod
  else
    -- edge's pod: the one of edge's pool type that holds the call.
    local found
    local function look(p)
      if p == pod or found then
        return
      end
      if kind == 'shared' then
        found = redis.call('TYPE', K.pod_calls(p))['ok'] == 'zset'
          and redis.call('ZSCORE', K.pod_calls(p), call_id) ~= false and p
      else
        found = redis.call('TYPE', K.pod_info(p))['ok'] == 'hash'
          and redis.call('HGET', K.pod_info(p), 'allocated_call_sid') == call_id and p
      end
    end
    local sets = {}
    for name, t in string.gmatch(ARGV[4], '(%S+) (%S+)') do
      if t == kind then
        local _, assigned = pools_of(name)
        sets[#sets + 1] = assigned
      end
    end
    if kind == 'exclusive' then
      for _, m in ipairs(redis.call('SMEMBERS', K.merchant_pools())) do
        sets[#sets + 1] = K.merchant_assigned(m)
      end
    end
    for _, set in ipairs(sets) do
      if redis.call('TYPE', set)['ok'] == 'set' then
        for _, p in ipairs(redis.call('SMEMBERS', set)) do
          look(p)
        end
      end
    end
    if found then
      -- A pod of edge's that cannot be freed cleanly (its pool's type
      -- changed since) is left to the sweep rather than holding up the
      -- release of the call.
      local t = redis.call('GET', K.pod_tier(found))
      local seen_bad = bad
      if t then
        edge_pod = plan(found, t, kind)
      end
      bad = seen_bad
    end
  end
end
if bad then
  return {'wrongtype', bad[1], bad[2]}
end

-- Phase 2: the writes.
end_call_record(call_id, KEYS[3], 'released', ARGV[2], tonumber(ARGV[3]), extra, f)
if pred_listed then
  redis.call('SREM', pred_set, call_id)
end
local now = now_ms()
local released_at = tostring(math.floor(now / 1000))
local function clear(pl)
  redis.call('HSET', K.pod_info(pl.pod), 'status', pl.draining and 'draining' or 'available',
    'allocated_call_sid', '', 'allocated_at', '', 'released_at', released_at)
end

-- A shared pod gives back slots of its score (never below 0); when no
-- per-call lease is left on it, its lease and owner go.
local function free_shared(pl, slots)
  local calls = K.pod_calls(pl.pod)
  redis.call('ZREM', calls, call_id)
  if pl.score and slots > 0 and pl.score > 0 then
    redis.call('ZINCRBY', pl.avail, -math.min(slots, pl.score), pl.pod)
  end
  if redis.call('ZCARD', calls) == 0 then
    redis.call('DEL', K.lease(pl.pod))
    clear(pl)
  end
  return (pl.score and not pl.draining) and 1 or 0
end

-- An exclusive pod the call owns goes back into the pool it came from,
-- only if the pod is still registered there (a pod removed meanwhile must
-- not come back as a ghost), and only if it is ready (the pod source puts
-- it back when it is).
local function free_exclusive(pl)
  if pl.leased then
    redis.call('DEL', K.lease(pl.pod))
  end
  local to_pool = 0
  if not pl.draining and not pl.unready and pl.registered then
    redis.call('SADD', pl.avail, pl.pod)
    to_pool = 1
  end
  clear(pl)
  return to_pool
end

-- edge's own pod of a record both routers wrote.
if edge_pod and edge_pod ~= named then
  if kind == 'shared' then
    free_shared(edge_pod, 1)
  elseif edge_pod.owned then
    free_exclusive(edge_pod)
  end
end

local reply
if pod_kind == 'shared' then
  -- A call of edge's own must still hold its per-call lease; the pod must
  -- still be in the call's tier: otherwise the slot went with it, and its
  -- lease and owner now belong to its new life.
  if (not legacy and not mixed and not named.per_call) or not named.registered then
    redis.call('ZREM', K.pod_calls(pod), call_id)
    reply = {'stale', pod, source, merchant_id, creator}
  else
    -- The predecessor counted its call in the score only; edge's call
    -- has its per-call lease (both, when both routers took this pod).
    local slots = 1
    if mixed and named.per_call then slots = 2 end
    reply = {'released', pod, free_shared(named, slots), named.draining and 1 or 0, source, merchant_id, creator}
  end
elseif not named.owned then
  reply = {'stale', pod, source, merchant_id, creator}
else
  reply = {'released', pod, free_exclusive(named), named.draining and 1 or 0, source, merchant_id, creator}
end
-- A pod or slot back in its pool goes to a waiting call first, on
-- whichever replica it waits (the hand-off is here, not a race of
-- retries).
serve_waiters(now)
return reply

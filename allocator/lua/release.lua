-- release.lua: end a call's allocation, fenced on the call still owning its pod.
--
-- KEYS[1] -> call info hash (K.call(call_id))
-- KEYS[2] -> the call's tombstone (K.call_ended(call_id))
-- ARGV[1] -> call id
-- ARGV[2] -> call info TTL in ms (the tombstone's)
-- ARGV[3] -> ended TTL in ms (the call's compact mark, lib.lua's mark_ended)
-- ARGV[4] -> number of tiers N, then N pairs: tier name, pool type (to know
--            a predecessor's call's pool type when its pool is absent)
-- ARGV[5+2N] -> number of record fields M, then M field/value pairs the
--            tombstone keeps beside the call info's (who released, and the
--            media socket's close code and counters when its end released)
--
-- Returns:
--   {"not_found"}                                      no live allocation
--   {"released", pod, to_pool (0|1), was_draining (0|1), source_pool}
--   {"stale", pod}   the call info was left over, but the pod no longer
--                    belongs to this call (its lease ran out and the pod was
--                    recovered, maybe to serve another call): nothing is
--                    returned to any pool, only the call info is removed.
--
-- Runs once per allocation: the call info is deleted here, so a duplicate or
-- late release answers "not_found" and changes nothing. The call info goes
-- with its media claim, and a tombstone takes its place (how "released",
-- stale or not: either way the call is over), so a replayed webhook gets no
-- pod; the tombstone keeps the call's record for its timeline. A pod or
-- slot back in its pool goes to calls waiting for capacity first
-- (waitlib.lua's serve_waiters), in this same step.

local call_key, call_id = KEYS[1], ARGV[1]
local info = redis.call('HMGET', call_key, 'pod_name', 'source_pool', 'pool_type')
local pod, source, kind = info[1], info[2] or '', info[3]
if not pod then
  return {'not_found'}
end
local extra = {}
local at = 5 + 2 * tonumber(ARGV[4] or 0)
for i = at + 1, at + 2 * tonumber(ARGV[at] or 0) do
  extra[#extra + 1] = ARGV[i]
end
end_call_record(call_id, 'released', tonumber(ARGV[2]), tonumber(ARGV[3]), extra)

local tier = tier_of_source(source)
local avail = pools_of(tier)
local draining = is_draining(pod)
local now = now_ms()
local state = draining and 'draining' or 'available'

-- A call allocated by the predecessor has no pool_type: find it from the pool.
-- An absent pool (every pod out of it) says nothing: the tier config does.
local legacy = not kind
if legacy then
  local t = redis.call('TYPE', avail)['ok']
  if t == 'zset' then
    kind = 'shared'
  elseif t == 'set' then
    kind = 'exclusive'
  else
    kind = 'exclusive'
    for i = 5, 4 + 2 * tonumber(ARGV[4] or 0), 2 do
      if ARGV[i] == tier then kind = ARGV[i + 1] end
    end
  end
end

if kind == 'shared' then
  local calls = K.pod_calls(pod)
  if redis.call('ZREM', calls, call_id) == 0 and not legacy then
    return {'stale', pod}
  end
  -- The pod left the call's tier since (moved, or removed): the slot went
  -- with it, and its lease and owner now belong to its new life.
  if redis.call('GET', K.pod_tier(pod)) ~= tier then
    return {'stale', pod}
  end
  local score = redis.call('ZSCORE', avail, pod)
  if score and tonumber(score) > 0 then
    redis.call('ZINCRBY', avail, -1, pod)
  end
  if redis.call('ZCARD', calls) == 0 then
    redis.call('DEL', K.lease(pod))
    redis.call('HSET', K.pod_info(pod), 'status', state, 'allocated_call_sid', '',
      'allocated_at', '', 'released_at', tostring(math.floor(now / 1000)))
  end
  local to_pool = (score and not draining) and 1 or 0
  serve_waiters(now) -- the slot goes to a waiting call first (issue 10)
  return {'released', pod, to_pool, draining and 1 or 0, source}
end

if redis.call('HGET', K.pod_info(pod), 'allocated_call_sid') ~= call_id then
  return {'stale', pod}
end
if redis.call('GET', K.lease(pod)) == call_id then
  redis.call('DEL', K.lease(pod))
end
local to_pool = 0
-- Only back into the pool it came from, only if the pod is still registered
-- there (a pod removed meanwhile must not come back as a ghost), and only if
-- it is ready (the pod source puts it back when it is).
if not draining and not is_unready(pod) and redis.call('GET', K.pod_tier(pod)) == tier then
  redis.call('SADD', avail, pod)
  to_pool = 1
end
redis.call('HSET', K.pod_info(pod), 'status', state, 'allocated_call_sid', '',
  'allocated_at', '', 'released_at', tostring(math.floor(now / 1000)))
-- The pod goes to a waiting call first, on whichever replica it waits
-- (issue 10: the hand-off is here, not a race of retries).
serve_waiters(now)
return {'released', pod, to_pool, draining and 1 or 0, source}

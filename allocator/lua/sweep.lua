-- sweep.lua: the zombie sweep over a batch of pods (one round trip per batch).
-- Everything it reads and writes is read inside this script, so a Redis error
-- fails the whole batch and is never taken for "missing" (the predecessor's
-- zombie storm: a failed ZSCORE read as absent reset a busy pod to score 0).
--
-- Exclusive and merchant pods that are assigned, not draining, not unready,
-- not available and hold no live lease go back to their pool; the dead
-- call's info is deleted (leaving its tombstone) and allocated_call_sid
-- cleared, so a late socket, renew or release of that call finds no
-- allocation and a webhook retry gets a hangup. A shared
-- pod's expired per-call leases (and those calls' info) are dropped and its
-- score set to its live calls; one missing from its set is re-added with that
-- load unless draining or unready.
--
-- A per-call lease whose call info is gone, or names another pod, is a call
-- that ended elsewhere (the predecessor's release knows nothing of per-call
-- leases): it is dropped and never counted. In migration mode (the
-- predecessor may hold calls that only its score counts) a score is lowered
-- only by the calls this sweep saw expire, never set from the per-call
-- leases alone; and an exclusive pod whose recorded call still names it and
-- began less than a predecessor lease ago is busy even without a lease key
-- (the predecessor's release deletes the lease key of whoever holds the pod
-- by then).
--
-- KEYS[1] -> K.pod_metadata()
-- ARGV[1] -> fence: "", the Redis leader lock value or the Lease fence this leader holds
-- ARGV[2] -> call info TTL in ms (the tombstones')
-- ARGV[3] -> ended TTL in ms (the calls' compact marks)
-- ARGV[4] -> migration mode: the predecessor's lease in ms, else "0"
-- ARGV[5] -> N, then N x (tier name, type)
-- then the pod names
--
-- Returns {"fenced"} or {"ok", recovered, slots reclaimed, shared re-added,
-- calls expired, skipped (pool type mismatch), recovered pod names...}

if fence_lost(ARGV[1]) then
  return {'fenced'}
end
local info_ms, ended_ms = tonumber(ARGV[2]), tonumber(ARGV[3])
local migration_ms = tonumber(ARGV[4])
local migration = migration_ms > 0
-- In migration mode, how long a shared pod's score must stay below its
-- live calls before the sweep raises it (see below).
local DEFICIT_MS = 1000
local n = tonumber(ARGV[5])
local kinds = {}
for i = 0, n - 1 do
  kinds[ARGV[6 + 2 * i]] = ARGV[7 + 2 * i]
end

-- A pool whose Redis type contradicts its tier's type (the type was changed
-- at run time) is left alone rather than failing the batch with WRONGTYPE.
local types = {}
local function pool_type_ok(avail, kind)
  local t = types[avail]
  if not t then
    t = redis.call('TYPE', avail)['ok']
    types[avail] = t
  end
  return t == 'none' or (kind == 'shared') == (t == 'zset')
end

-- The call info of a call that lost its pod for good is deleted (only if it
-- still names this pod), and its tombstone written: the call is over.
local ended = {}
local function end_call(call_id, pod)
  if call_id and call_id ~= '' and redis.call('HGET', K.call(call_id), 'pod_name') == pod then
    end_call_record(call_id, ended_mark_key(call_id), 'expired', info_ms, ended_ms)
    ended[#ended + 1] = call_id
  end
end

local now = now_ms()
local recovered, reclaimed, readded, expired, skipped = {}, 0, 0, 0, 0
for i = 6 + 2 * n, #ARGV do
  local pod = ARGV[i]
  local tier = redis.call('GET', K.pod_tier(pod))
  local kind = tier and (string.sub(tier, 1, 9) == 'merchant:' and 'exclusive' or kinds[tier])
  if kind then
    local avail, assigned = pools_of(tier)
    if not pool_type_ok(avail, kind) then
      skipped = skipped + 1
    else
      local draining = is_draining(pod)
      local unready = is_unready(pod)
      if unready then
        -- Never available while unready, whatever put it back (e.g. a
        -- predecessor replica's release).
        remove_from_pool(avail, pod)
      end
      if kind == 'shared' then
        local calls = K.pod_calls(pod)
        -- A call whose per-call lease ran out is over: its call info goes
        -- too, so a late socket, renew or webhook retry finds no allocation.
        for _, dead in ipairs(redis.call('ZRANGEBYSCORE', calls, '-inf', '(' .. now)) do
          end_call(dead, pod)
        end
        local gone = redis.call('ZREMRANGEBYSCORE', calls, '-inf', '(' .. now)
        expired = expired + gone
        local ended_elsewhere = 0
        for _, id in ipairs(redis.call('ZRANGE', calls, 0, -1)) do
          if redis.call('HGET', K.call(id), 'pod_name') ~= pod then
            redis.call('ZREM', calls, id)
            ended_elsewhere = ended_elsewhere + 1
          end
        end
        local live = redis.call('ZCARD', calls)
        -- No per-call lease ever, but a lease key: calls allocated by the
        -- predecessor, which counted them only in the score. Keep it.
        local legacy = live == 0 and gone == 0 and redis.call('EXISTS', K.lease(pod)) == 1
        if live == 0 and gone + ended_elsewhere > 0 and not migration then
          redis.call('DEL', K.lease(pod))
          redis.call('HSET', K.pod_info(pod), 'status', draining and 'draining' or 'available',
            'allocated_call_sid', '', 'allocated_at', '')
        end
        local score = redis.call('ZSCORE', avail, pod)
        if score then
          score = tonumber(score)
          local want = live
          if migration and score > live then
            -- Calls only the predecessor's score counts may be live: take
            -- back only the slots of calls seen to expire here.
            want = math.max(live, score - gone)
          elseif migration and live > score then
            -- The predecessor's release of an edge call lowers the score
            -- before it deletes the call info: until then the call looks
            -- live here, its slot already given back. Raised in that
            -- window, the slot stayed counted for good (the call then
            -- ends elsewhere and its lease is dropped uncounted). A score
            -- still short DEFICIT_MS after it was first seen short is
            -- raised (the predecessor's double release, its zombie
            -- cleanup's ZADD 0).
            local seen = tonumber(redis.call('HGET', K.pod_info(pod), 'load_deficit_at') or '')
            if not seen then
              redis.call('HSET', K.pod_info(pod), 'load_deficit_at', tostring(now))
              want = score
            elseif now - seen < DEFICIT_MS then
              want = score
            else
              redis.call('HDEL', K.pod_info(pod), 'load_deficit_at')
            end
          end
          if not (migration and live > score) then
            redis.call('HDEL', K.pod_info(pod), 'load_deficit_at')
          end
          if score ~= want and not legacy then
            redis.call('ZADD', avail, 'XX', want, pod)
            if score > want then
              reclaimed = reclaimed + (score - want)
            end
          end
        elseif not draining and not unready and redis.call('SISMEMBER', assigned, pod) == 1 then
          redis.call('ZADD', avail, live, pod)
          readded = readded + 1
        end
      elseif not draining and not unready
          and redis.call('SISMEMBER', assigned, pod) == 1
          and redis.call('SISMEMBER', avail, pod) == 0
          and not live_owner(pod) and not recent_owner(pod, now, migration_ms) then
        end_call(redis.call('HGET', K.pod_info(pod), 'allocated_call_sid'), pod)
        redis.call('DEL', K.lease(pod))
        redis.call('SADD', avail, pod)
        redis.call('HSET', K.pod_info(pod), 'status', 'available', 'allocated_call_sid', '',
          'allocated_at', '')
        recovered[#recovered + 1] = pod
      end
    end
  end
end
-- Pods and slots recovered go to calls waiting for capacity first
-- (admission.wait).
if #recovered + reclaimed + readded > 0 then
  serve_waiters(now)
end
local out = {'ok', #recovered, reclaimed, readded, expired, skipped}
for _, pod in ipairs(recovered) do
  out[#out + 1] = pod
end
-- Then the calls ended (their lease ran out), for the sweep's log line.
for _, call_id in ipairs(ended) do
  out[#out + 1] = call_id
end
return out

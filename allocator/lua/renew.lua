-- renew.lua: extend the leases of a batch of calls, each only if the call
-- still owns its pod. One round trip for every socket of a replica.
--
-- KEYS[i] -> call info hash of the i-th call
-- ARGV[1] -> lease TTL in ms
-- ARGV[2] -> call info TTL in ms
-- ARGV[3] -> the data set epoch this replica knows ("" none; see lib/recovery.lua)
-- ARGV[4] -> the random part of a new epoch, stored if none is
-- ARGV[5] -> recovery hold in ms
-- ARGV[6] -> this replica's name (the socket_replica of what it re-asserts)
-- ARGV[7] -> ended TTL in ms (the compact marks of ended calls, never
--            written back)
-- then 8 per call: call id, pod, media claim holder ("" holder: no claim
--            is checked), and what re-asserting it needs: source_pool,
--            pool_type, merchant id, creator ("" pool_type: it cannot be),
--            account ("" none)
--
-- Returns: the epoch stored now ("" none), the calls written back and the
-- calls that could not be (see below), then one integer per call: 1 renewed,
-- 0 the call no longer owns the pod (released, swept, or its pod removed),
-- the holder no longer holds the call's media claim, or the provider said
-- the call ended (its ended_by, release.lua): its socket should close; 2
-- its pod left the registry and the call was handed to this socket
-- (unregister.lua's pod_gone): the socket moves it to another pod
-- (move_call.lua), nothing is renewed meanwhile.
--
-- Only the socket holding the claim keeps the call alive: a socket that lost
-- its claim (dropped, or never taken, e.g. admitted by an edge before claims)
-- cannot keep renewing a call whose media another socket may carry.
--
-- When the epoch differs from the one the replica knows, Redis lost its
-- data since the replica last looked: a call whose info is gone and that has
-- no tombstone is written back as the replica knows it (call info, claim,
-- lease, the pod's state, the merchant's count), unless its pod serves
-- another call by now. allocate.lua offers no pod meanwhile (the hold), so
-- a busy pod is never given to a second call.

local lease_ms, info_ms, ended_ms = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[7])
local known, replica = ARGV[3], ARGV[6]
local now = now_ms()
local epoch = current_epoch(known, ARGV[4], tonumber(ARGV[5]), now)
local emptied = known ~= '' and epoch ~= nil and epoch ~= known

local function reassert(call_key, call_id, pod, holder, source, kind, merchant, creator, account)
  if kind == '' or source == '' or redis.call('EXISTS', K.call_ended(call_id)) == 1
      or ended_mark(ended_mark_key(call_id), call_id, ended_ms, now) then
    return 0
  end
  if kind ~= 'shared' then
    local owner = live_owner(pod)
    if owner and owner ~= call_id then
      return 0
    end
  end
  -- The pod keeps the tier its call came from: the pod source's next sync
  -- then finds it there, busy, instead of assigning it afresh.
  local tier = redis.call('GET', K.pod_tier(pod))
  if not tier then
    tier = tier_of_source(source)
    redis.call('SET', K.pod_tier(pod), tier)
  end
  local avail = pools_of(tier)
  redis.call('HSET', call_key, 'pod_name', pod, 'source_pool', source, 'merchant_id', merchant,
    'allocated_at', tostring(math.floor(now / 1000)), 'allocated_at_ms', tostring(now), 'pool_type', kind, 'creator', creator,
    'reasserted_at', tostring(now), 'edge_pod', pod)
  if account ~= '' then
    redis.call('HSET', call_key, 'account', account)
  end
  -- A call answered here whose socket has not come (holder "") is written
  -- back unclaimed, for its socket to claim on any replica.
  if holder ~= '' then
    redis.call('HSET', call_key, 'media_claim', holder, 'socket_replica', replica)
  end
  redis.call('PEXPIRE', call_key, info_ms)
  if kind == 'shared' then
    if redis.call('TYPE', avail)['ok'] == 'zset' and redis.call('ZSCORE', avail, pod) then
      redis.call('ZINCRBY', avail, 1, pod)
    end
    redis.call('ZADD', K.pod_calls(pod), now + lease_ms, call_id)
  else
    remove_from_pool(avail, pod)
  end
  redis.call('HSET', K.pod_info(pod), 'status', 'allocated', 'allocated_call_sid', call_id,
    'allocated_at', tostring(math.floor(now / 1000)), 'source_pool', source)
  redis.call('SET', K.lease(pod), call_id, 'PX', lease_ms)
  count_call(merchant, call_id, now + lease_ms, now)
  if replica ~= '' and holder ~= '' then
    redis.call('SADD', K.replica_calls(replica), call_id)
  end
  return 1
end

local out = {epoch or '', 0, 0}
local reasserted, lost = 0, 0
for i, call_key in ipairs(KEYS) do
  local a = 8 + 8 * (i - 1)
  local call_id, pod, holder = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local info = redis.call('HMGET', call_key, 'pod_name', 'pool_type', 'media_claim', 'merchant_id', 'ended_by', 'pod_gone')
  local ok = 0
  if not info[1] and emptied then
    ok = reassert(call_key, call_id, pod, holder, ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6], ARGV[a + 7] or '')
    reasserted, lost = reasserted + ok, lost + 1 - ok
  elseif info[5] then
    -- The provider said the call ended (release.lua's "socket_open"): its
    -- socket should have closed; a socket the provider never closed is
    -- not kept alive, and its end releases the call.
    ok = 0
  elseif info[6] then
    if info[1] == pod and holder ~= '' and info[3] == holder then
      ok = 2
    end
  elseif info[1] == pod and (holder == '' or info[3] == holder or (emptied and not info[3])) then
    if holder ~= '' and not info[3] then
      -- Written back by the replica that answered the call, before this
      -- one (which holds its socket) wrote it back: the claim is this
      -- socket's.
      redis.call('HSET', call_key, 'media_claim', holder, 'socket_replica', replica)
      if replica ~= '' then
        redis.call('SADD', K.replica_calls(replica), call_id)
      end
    end
    if info[2] == 'shared' then
      if redis.call('ZSCORE', K.pod_calls(pod), call_id) then
        redis.call('ZADD', K.pod_calls(pod), 'XX', now + lease_ms, call_id)
        redis.call('SET', K.lease(pod), call_id, 'PX', lease_ms)
        ok = 1
      end
    else
      local owner = redis.call('HGET', K.pod_info(pod), 'allocated_call_sid') or ''
      if owner == '' and live_owner(pod) == call_id then
        -- The predecessor's release resets the pod info of whoever holds
        -- the pod by then (its allocation fields cleared): a call
        -- allocated between its DEL of the lease and that reset still
        -- holds the lease and its call info names the pod. It owns the
        -- pod; its pod info is written back.
        local at = redis.call('HMGET', call_key, 'allocated_at', 'source_pool')
        redis.call('HSET', K.pod_info(pod), 'status', is_draining(pod) and 'draining' or 'allocated',
          'allocated_call_sid', call_id, 'allocated_at', at[1] or '', 'source_pool', at[2] or '')
        owner = call_id
      end
      if owner == call_id then
        redis.call('SET', K.lease(pod), call_id, 'PX', lease_ms)
        ok = 1
      end
    end
    if ok == 1 and redis.call('PTTL', call_key) < info_ms then
      redis.call('PEXPIRE', call_key, info_ms)
    end
    if ok == 1 then
      count_call(info[4], call_id, now + lease_ms) -- the merchant's live calls
    end
  end
  out[#out + 1] = ok
end
out[2], out[3] = reasserted, lost
return out

-- waits.lua: waiting for capacity (admission.wait), for the scripts
-- that start, serve, poll and end waits. Keys (allocator/keys.go): a queue per merchant
-- (K.wait_queue, FIFO), the ring of merchants with waiters (K.wait_ring,
-- round robin), every waiter's deadline (K.wait_deadline) and a ticket per
-- waiting call (K.wait_ticket). A merchant is in the ring exactly while its
-- queue is not empty.
--
-- The hand-off happens here, in Redis: whichever script finds room while
-- calls wait (a release, an allocate, a replica's poll) gives it to the
-- waiters first, writing their allocations itself, and publishes their
-- call ids on K.wait_wake(). So a pod freed on any replica goes to a
-- waiter on any replica, in the waiters' order, whether or not the
-- waiter's replica is quick (or alive) to ask again.

-- Takes a call out of its merchant's queue, and the merchant out of the
-- ring when its queue empties.
local function leave_queue(merchant, call_id)
  local q = K.wait_queue(merchant)
  redis.call('LREM', q, 1, call_id)
  if redis.call('LLEN', q) == 0 then
    redis.call('LREM', K.wait_ring(), 0, merchant)
  end
end

-- Drops up to n waiters whose deadline passed (their replica gave up on
-- them, or died): out of the deadline set, their queue and the ring.
local function prune_waiters(now, n)
  local expired = redis.call('ZRANGEBYSCORE', K.wait_deadline(), '-inf', '(' .. now, 'LIMIT', 0, n)
  for _, call_id in ipairs(expired) do
    local merchant = redis.call('HGET', K.wait_ticket(call_id), 'merchant')
    if merchant then
      leave_queue(merchant, call_id)
    end
    redis.call('ZREM', K.wait_deadline(), call_id)
    redis.call('DEL', K.wait_ticket(call_id))
  end
end

-- Queues call_id as the last waiter of its merchant: its ticket holds what
-- its allocation will write and the chain it waits for. Returns the
-- deadline (unix ms).
-- deferred: only a call that finds every pod busy waits.
local function start_wait(call_id, merchant, creator, traceparent, chain, tiers, cap, lease_ms, info_ms, budget_ms, now)
  local deadline = now + budget_ms
  local used = {}
  for _, step in ipairs(chain) do
    if tiers[step] then used[step] = tiers[step] end
  end
  local ticket = K.wait_ticket(call_id)
  redis.call('HSET', ticket, 'merchant', merchant, 'creator', creator, 'traceparent', traceparent,
    'lease_ms', lease_ms, 'info_ms', info_ms, 'cap', cap and tostring(cap) or '',
    'plan', cjson.encode({c = chain, t = used}), 'deadline', deadline)
  redis.call('PEXPIRE', ticket, budget_ms + 60000)
  redis.call('ZADD', K.wait_deadline(), deadline, call_id)
  local q = K.wait_queue(merchant)
  if redis.call('RPUSH', q, call_id) == 1 then
    redis.call('RPUSH', K.wait_ring(), merchant)
  end
  -- A safety net only: queue and ring empty themselves as waiters leave.
  redis.call('PEXPIRE', q, budget_ms + 60000)
  redis.call('PEXPIRE', K.wait_ring(), budget_ms + 60000)
  -- Releases hand their pod to waiters only while K.wait_recent() exists:
  -- it lasts as long as the longest wait started may.
  if redis.call('PTTL', K.wait_recent()) < budget_ms + 60000 then
    redis.call('SET', K.wait_recent(), '1', 'PX', budget_ms + 60000)
  end
  return deadline
end

-- Serves the head of merchant's queue if its chain has room: returns the
-- call id served, or nil and why not ("empty", "capped", "busy"). Heads
-- whose deadline passed, or whose call already holds a pod, leave on the
-- way (a call id never gets a second pod).
local function serve_head(merchant, now)
  local q, ring = K.wait_queue(merchant), K.wait_ring()
  while true do
    local call_id = redis.call('LINDEX', q, 0)
    if not call_id then
      redis.call('LREM', ring, 0, merchant)
      return nil, 'empty'
    end
    local ticket = K.wait_ticket(call_id)
    local t = redis.call('HMGET', ticket, 'plan', 'cap', 'creator', 'traceparent', 'lease_ms', 'info_ms', 'served', 'account')
    local deadline = tonumber(redis.call('ZSCORE', K.wait_deadline(), call_id) or '-1')
    if not t[1] or deadline < now or redis.call('EXISTS', K.call(call_id)) == 1 then
      -- Not a head to serve: gone, past its deadline, or its call holds a
      -- pod already (it is marked served, so its allocate answers that).
      redis.call('LPOP', q)
      redis.call('ZREM', K.wait_deadline(), call_id)
      if t[1] and deadline >= now then
        redis.call('HSET', ticket, 'served', '1')
      elseif t[7] ~= '1' then
        redis.call('DEL', ticket)
      end
    else
      local cap = tonumber(t[2])
      if cap and merchant ~= '' and merchant_live(merchant, now) >= cap then
        return nil, 'capped'
      end
      local plan = cjson.decode(t[1])
      local pod, source, kind, avail = take_from_chain(plan.c, plan.t, nil)
      if not pod then
        return nil, 'busy'
      end
      write_allocation(call_id, merchant, t[3] or '', t[4] or '', pod, source, kind, avail,
        tonumber(t[5]), tonumber(t[6]), now)
      if t[8] and t[8] ~= '' then
        -- The provider account whose webhook started the wait.
        redis.call('HSET', K.call(call_id), 'account', t[8])
      end
      redis.call('LPOP', q)
      redis.call('ZREM', K.wait_deadline(), call_id)
      redis.call('HSET', ticket, 'served', '1')
      -- Round robin: the merchant served goes to the ring's tail.
      redis.call('LREM', ring, 0, merchant)
      if redis.call('LLEN', q) > 0 then
        redis.call('RPUSH', ring, merchant)
      end
      return call_id
    end
  end
end

-- Gives what room there is to waiters, merchant by merchant in ring order,
-- each merchant's oldest first, and publishes the calls served. At most
-- 64 served per run; cheap (one ZCARD) when nobody waits. Returns the
-- calls served.
-- deferred: releases look for waiters only while a call may wait.
local function serve_waiters(now)
  if redis.call('ZCARD', K.wait_deadline()) == 0 then
    return {}
  end
  prune_waiters(now, 32)
  local served = {}
  for _ = 1, 64 do
    local progress = false
    for _, merchant in ipairs(redis.call('LRANGE', K.wait_ring(), 0, 63)) do
      local call_id = serve_head(merchant, now)
      if call_id then
        served[#served + 1] = call_id
        progress = true
      end
    end
    if not progress or #served >= 64 then break end
  end
  if #served > 0 then
    redis.call('PUBLISH', K.wait_wake(), table.concat(served, ' '))
  end
  return served
end

-- Ends call_id's wait: "waiting" (it was still queued: now it is not),
-- "served" (a script gave it a pod: the ticket stays, marked, unless
-- drop_served, for its allocate to pick the pod up) or "gone" (no ticket:
-- its deadline passed and it was pruned).
-- deferred: only a waiting call ends a wait.
local function end_wait(call_id, drop_served)
  local ticket = K.wait_ticket(call_id)
  local t = redis.call('HMGET', ticket, 'merchant', 'served')
  if t[2] == '1' then
    if drop_served then redis.call('DEL', ticket) end
    return 'served'
  end
  if redis.call('ZREM', K.wait_deadline(), call_id) == 1 then
    if t[1] then leave_queue(t[1], call_id) end
    redis.call('DEL', ticket)
    return 'waiting'
  end
  redis.call('DEL', ticket)
  return 'gone'
end

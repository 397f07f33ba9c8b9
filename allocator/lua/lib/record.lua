-- record.lua: a call's record: the allocation's writes and the end of a call.

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
-- the release gives up). f is fields by name when the caller has made
-- it (nil: made here), now_text is now as text when it has that: each
-- saves Redis time per call. Returns the time it ended (unix ms).
local function end_call_record(call_id, how, ttl_ms, horizon_ms, extra, fields, edge_only, now, also_del, f, now_text)
  local call_key, tomb = K.call(call_id), K.call_ended(call_id)
  if not fields then
    fields = redis.call('HGETALL', call_key)
  end
  if not f then
    f = {}
    for i = 1, #fields - 1, 2 do
      f[fields[i]] = fields[i + 1]
    end
  end
  uncount_call(call_id, f.merchant_id or '')
  local socket_replica, answered_by = f.socket_replica or '', f.answered_by or ''
  if socket_replica ~= '' then
    redis.call('SREM', K.replica_calls(socket_replica), call_id)
  end
  if answered_by ~= '' then
    redis.call('SREM', K.replica_calls(answered_by), call_id)
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
  local record = {'how', how, 'ended_at', now_text or tostring(now)}
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
-- the merchant's count (allocate.lua, and waits.lua's hand-off to a
-- waiting call). more is nil or a flat list of further call info fields,
-- written in the same HSET. The call info's edge_pod is the pod edge gave
-- the call: while pod_name names the same pod, the record is edge's alone
-- (an allocate that respects the predecessor's idempotency lock wrote it,
-- so the predecessor never stored its own pod over it), and release.lua
-- skips its checks for records both routers wrote.
local function write_allocation(call_id, merchant, creator, traceparent, pod, source, kind, avail, lease_ms, info_ms, now, more)
  local call_key = K.call(call_id)
  -- now as text once, with '%d' (Lua's tostring is a floating point
  -- printf that costs about as much as a command): unix ms has 13
  -- digits, its first 10 the seconds.
  local now_ms_s = string.format('%d', now)
  local now_s = string.sub(now_ms_s, 1, -4)
  local fields = {'pod_name', pod, 'source_pool', source, 'merchant_id', merchant,
    'allocated_at', now_s, 'allocated_at_ms', now_ms_s, 'pool_type', kind,
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
  assign(pod, call_id, source, kind, avail, lease_ms, now, now_s)
  count_call(merchant, call_id, now + lease_ms, now, true)
end


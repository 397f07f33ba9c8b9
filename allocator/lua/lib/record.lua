-- record.lua: a call's record: the allocation's writes and the end of a call.

-- end_call_record ends a call's info: RENAME makes it the call's tombstone
-- (K.call_ended), the call's record, whole and without a field of it
-- passing through the script (any tombstone of the call there goes, an
-- older replica's STRING one too); the media claim and the resumable mark
-- (a socket's identity, never shown) are taken out, how it ended, ended_at
-- (unix ms) and extra (a flat list of field/value pairs) written over it;
-- it lives ttl_ms. The call's compact mark (mark_ended) keeps it ended for
-- horizon_ms, in mark_key (its ended_mark_key). The caller has checked that the call info exists and is the
-- one to end. The call leaves its merchant's count (admission) in the same
-- step.
-- f is the call info's fields by name as the caller read them, at least
-- those read here when it is nil; edge_only says the record is edge's
-- alone (its edge_pod is its pod_name), so the predecessor's per-pod set
-- cannot list the call. now is Redis' time if the caller read it (nil:
-- read here), now_text now as text when it has that; also_del is nil or
-- one more key to delete (a lease the release gives up). Returns the time
-- it ended (unix ms).
local function end_call_record(call_id, mark_key, how, ttl_ms, horizon_ms, extra, f, edge_only, now, now_text, also_del)
  local call_key, tomb = K.call(call_id), K.call_ended(call_id)
  if not f then
    -- Who counts the call (its merchant, the replicas' sets), its pod, and
    -- the fields a record never shows.
    local got = redis.call('HMGET', call_key, 'merchant_id', 'socket_replica', 'answered_by', 'pod_name',
      'media_claim', 'resumable')
    f = {merchant_id = got[1], socket_replica = got[2], answered_by = got[3], pod_name = got[4],
      media_claim = got[5], resumable = got[6]}
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
    redis.call('DEL', also_del)
  end
  redis.call('RENAME', call_key, tomb)
  if f.media_claim or f.resumable then
    redis.call('HDEL', tomb, 'media_claim', 'resumable')
  end
  now = now or now_ms()
  -- extra last: it overrides a field of the same name.
  redis.call('HSET', tomb, 'how', how, 'ended_at', now_text or string.format('%d', now), unpack(extra or {}))
  redis.call('PEXPIRE', tomb, ttl_ms)
  mark_ended(mark_key, call_id, how, horizon_ms, now)
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


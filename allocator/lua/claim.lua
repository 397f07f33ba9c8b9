-- claim.lua: admit one media socket for a call, across every replica. The
-- call must be live on the pod the socket asks for, and no other socket may
-- hold it; the check and the claim are one step, so two sockets racing on
-- two replicas cannot both win.
--
-- KEYS[1] -> call info hash (K.call(call_id))
-- ARGV[1] -> pod the socket asks for
-- ARGV[2] -> holder: the socket's identity (replica and a per-socket nonce)
-- ARGV[3] -> the replica's name, for the call's timeline
-- ARGV[4] -> stale after: unix ms past which the socket has given up
--            ("0": none): a claim that reaches Redis later claims nothing
--
-- Returns:
--   {"claimed", pod, traceparent, merchant_id, creator, moved_from,
--    source_pool, pool_type, failed_handshakes, account}
--                        the socket holds the call (also if it already did);
--                        pod is where the call is: ARGV[1], or the pod it
--                        was moved to when ARGV[1] is one it left after a
--                        failed connect (move_call.lua's moved_from), so the
--                        media URL the provider holds stays valid;
--                        traceparent is the webhook's (allocate.lua), ""
--                        when none was kept; the rest is the call info's,
--                        for the socket's log lines and for re-asserting
--                        the call should Redis lose its data (renew.lua);
--                        failed_handshakes counts the call's earlier
--                        sockets that reached no pod and left the call to
--                        the provider's retry (unclaim.lua), a number
--   {"not_found", pod}   the call is not live on ARGV[1]; pod is where it
--                        is ("" when it is live nowhere)
--   {"held", holder}     another socket holds the call
--   {"stale"}            the socket gave up before Redis ran the script:
--                        nothing is written
--
-- The claim is a field of the call info, so it ends with the call: release,
-- the sweep and unregister delete the hash. A socket that ends without its
-- call ending drops it (unclaim.lua); one whose replica died (kill -9) holds
-- it until the leader finds that replica dead (orphans.lua) or the call's
-- lease runs out, and the sweep ends the call.

local now = now_ms()
if stale(ARGV[4], now) then
  return {'stale'}
end
local info = redis.call('HMGET', KEYS[1], 'pod_name', 'media_claim', 'moved_from', 'traceparent', 'merchant_id', 'creator',
  'source_pool', 'pool_type', 'failed_handshakes', 'account')
if info[1] ~= ARGV[1] and not (info[1] and info[3] and
    string.find(info[3], '|' .. ARGV[1] .. '|', 1, true)) then
  return {'not_found', info[1] or ''}
end
if info[2] and info[2] ~= ARGV[2] then
  return {'held', info[2]}
end
-- A new claim stamps the socket's opening on the call info (its timeline);
-- a repeated one changes nothing.
if not info[2] then
  redis.call('HSET', KEYS[1], 'media_claim', ARGV[2], 'socket_opened_at', tostring(now),
    'socket_replica', ARGV[3] or '')
  -- The replica's calls, for the leader to end should it die (orphans.lua).
  if ARGV[3] and ARGV[3] ~= '' then
    local call_id = string.sub(KEYS[1], #K.call('') + 1)
    redis.call('SADD', K.replica_calls(ARGV[3]), call_id)
  end
end
return {'claimed', info[1], info[4] or '', info[5] or '', info[6] or '', info[3] or '', info[7] or '', info[8] or '',
  tonumber(info[9] or '0') or 0, info[10] or ''}

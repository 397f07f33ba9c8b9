-- unclaim.lua: drop a media socket's claim on its call, fenced on the
-- holder, when the socket ends but the call does not (e.g. the pod could not
-- be dialled): the provider's retry may then be admitted on any replica.
--
-- KEYS[1] -> call info hash (K.call(call_id))
-- ARGV[1] -> holder (as given to claim.lua)
-- ARGV[2] -> "failed" when the socket reached no pod and its call is kept
--            for the provider's own retry of the handshake: the call info's
--            failed_handshakes is incremented (claim.lua returns it), so
--            that the proxy on any replica knows the retry was spent
--
-- Returns {1} when the holder's claim was dropped, {0} when it held none
-- (the call ended, or another socket holds it: left alone).

if redis.call('HGET', KEYS[1], 'media_claim') == ARGV[1] then
  local replica = redis.call('HGET', KEYS[1], 'socket_replica')
  if replica and replica ~= '' then
    local call_id = string.sub(KEYS[1], #K.call('') + 1)
    redis.call('SREM', K.replica_calls(replica), call_id)
  end
  redis.call('HDEL', KEYS[1], 'media_claim')
  if ARGV[2] == 'failed' then
    redis.call('HINCRBY', KEYS[1], 'failed_handshakes', 1)
  end
  return {1}
end
return {0}

-- unwait.lua: end a call's wait for capacity (admission.wait):
-- its caller gave up (the webhook's request ended) or its budget ran out.
--
-- KEYS[1] -> K.wait_deadline() (routes the script on Redis Cluster)
-- ARGV[1] -> call id
-- ARGV[2] -> "1" when the caller gave up: a pod it was given in a race is
--            the caller's to release, and its ticket goes; "0" when the
--            budget ran out: the caller still listens, and picks the pod
--            up with its allocate
-- ARGV[3] -> creator of the asker: only the call's own creator ends its wait
--
-- Returns: {"waiting"} it was queued and is not any more (nothing else
-- changes); {"served", pod} a script gave it a pod first; {"gone"} its
-- deadline had passed and a script pruned it (or the wait is another
-- caller's: nothing changes).

local call_id = ARGV[1]
local owner = redis.call('HGET', K.wait_ticket(call_id), 'creator')
if owner and owner ~= ARGV[3] then
  return {'gone'}
end
local how = end_wait(call_id, ARGV[2] == '1')
if how == 'served' then
  return {how, redis.call('HGET', K.call(call_id), 'pod_name') or ''}
end
return {how}

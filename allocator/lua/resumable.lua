-- resumable.lua: mark a call as one whose media socket moves to another pod
-- when its pod dies or leaves the registry (the proxy's proxy.resume), so
-- that unregister.lua hands the call to its socket instead of ending it.
--
-- KEYS[1] -> call info hash (K.call(call_id))
-- ARGV[1] -> holder: the socket's media claim; only it may mark the call
--
-- Returns {1} when marked, {0} when holder does not hold the call's claim (the
-- call ended, or another socket holds it).

if redis.call('HGET', KEYS[1], 'media_claim') ~= ARGV[1] then
  return {0}
end
redis.call('HSET', KEYS[1], 'resumable', ARGV[1])
return {1}

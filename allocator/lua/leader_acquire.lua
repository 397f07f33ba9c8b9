-- leader_acquire.lua: take the Redis leader lock if nobody holds it, with a
-- new fencing token (used with the static pod source, where there is no
-- Kubernetes Lease).
--
-- KEYS[1] -> K.leader_lock()
-- KEYS[2] -> the fencing counter (Keys.LeaderFence)
-- ARGV[1] -> identity of this replica
-- ARGV[2] -> lock TTL in ms
--
-- Returns {1, lock value "<identity>/<token>"} when acquired, or {0, value of
-- the current holder}.

local held = redis.call('GET', KEYS[1])
if held then
  return {0, held}
end
local token = redis.call('INCR', KEYS[2])
local value = ARGV[1] .. '/' .. token
redis.call('SET', KEYS[1], value, 'PX', tonumber(ARGV[2]))
return {1, value}

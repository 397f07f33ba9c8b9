-- leader_renew.lua: extend the Redis leader lock, only while this holder
-- (with this fencing token) still holds it.
--
-- KEYS[1] -> K.leader_lock()
-- ARGV[1] -> lock value "<identity>/<token>" from leader_acquire
-- ARGV[2] -> lock TTL in ms
--
-- Returns 1 renewed, 0 lost (expired, or another replica holds it).

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
  return 1
end
return 0

-- leader_release.lua: give up the Redis leader lock for a fast hand-over,
-- only if this holder still holds it.
--
-- KEYS[1] -> K.leader_lock()
-- ARGV[1] -> lock value "<identity>/<token>" from leader_acquire
--
-- Returns 1 released (and published on the channel named KEYS[1]), 0 not
-- held.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  -- Followers subscribed to the lock's name campaign at once rather than at
  -- their next retry.
  redis.call('PUBLISH', KEYS[1], 'released')
  return 1
end
return 0

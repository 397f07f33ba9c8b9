-- acquire.lua: take the issuance lock of one host, unless a replica holds it
-- or a recent issuance failed.
--
-- KEYS[1] -> the host's lock (keys.lock)
-- ARGV[1] -> this replica's random token
-- ARGV[2] -> the lock's TTL in milliseconds (issue_timeout plus a margin)
--
-- Returns: "" when this replica now holds the lock; otherwise the lock's
-- value, left untouched: another replica's token, or "failed" while the
-- backoff after a failed issuance runs.
local cur = redis.call('GET', KEYS[1])
if cur then
  return cur
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ''

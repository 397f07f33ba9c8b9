-- release.lua: end an issuance: free the host's lock (or turn it into the
-- retry backoff after a failure) and wake the replicas waiting for it, in
-- one step so that a waiter never sees the lock gone without the event.
--
-- KEYS[1] -> the host's lock (keys.lock)
-- ARGV[1] -> the token this replica acquired the lock with
-- ARGV[2] -> the result: "ok" (the certificate is in the store) or "failed"
-- ARGV[3] -> the retry backoff in milliseconds (used when "failed")
-- ARGV[4] -> the host's Pub/Sub channel (keys.issued)
--
-- Returns: 1 when this replica still held the lock, 0 when it had expired
-- (it is then another replica's or gone, and left alone). The result is
-- published either way: a certificate in the store is news to waiters.
local held = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  held = 1
  if ARGV[2] == 'ok' then
    redis.call('DEL', KEYS[1])
  else
    redis.call('SET', KEYS[1], 'failed', 'PX', ARGV[3])
  end
end
redis.call('PUBLISH', ARGV[4], ARGV[2])
return held

-- wait_poll.lua: a replica's periodic look at its waiting calls
-- (admission.wait). Room that appeared without a script serving
-- waiters (a sweep, a pod registered or ready again, a reinstated pod) is
-- given to them here, and a lost wake message costs no more than a poll.
--
-- KEYS[1] -> K.wait_deadline() (routes the script on Redis Cluster)
-- ARGV    -> the call ids waiting on this replica
--
-- Returns: {waiters, status...}: how many calls wait on every replica,
-- then per call id in order "served" (it has a pod: its allocate picks it
-- up), "waiting" or "gone" (no longer queued: its deadline passed).

local now = now_ms()
serve_waiters(now)
prune_waiters(now, 256)
local out = {redis.call('ZCARD', K.wait_deadline())}
for _, call_id in ipairs(ARGV) do
  if redis.call('HGET', K.wait_ticket(call_id), 'served') == '1' then
    out[#out + 1] = 'served'
  elseif redis.call('ZSCORE', K.wait_deadline(), call_id) then
    out[#out + 1] = 'waiting'
  else
    out[#out + 1] = 'gone'
  end
end
return out
